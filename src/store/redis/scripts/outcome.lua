-- Looks a job up for a waiter (see JobStore::outcome): a live job first; else the newer of its kept
-- finish and its newest listed death. A live job gets a waiter until now + wait ms when asked: its id
-- in `waited` (the later of two waits' ends), and `waits` set in stats, so that whatever ends it
-- announces it (outcomes.lua). Drops up to 16 waiters whose time ended.
-- ARGV: id, wait ms (0: look only).
-- Returns {1, progress|nil} live, {2, kept value} kept, {3, "<died at> <reason>"} dead, {0} unknown.
local id, wait = ARGV[1], tonumber(ARGV[2])
if redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id) then
  if wait > 0 then
    local now = now_ms()
    local old = redis.call('ZRANGE', K_WAITED, '-inf', '(' .. string.format('%d', now), 'BYSCORE', 'LIMIT', 0, 16)
    if #old > 0 then
      call_many('ZREM', K_WAITED, old, 1)
    end
    redis.call('ZADD', K_WAITED, 'GT', string.format('%d', now + wait), id)
    redis.call('HSET', K_STATS, 'waits', '1')
  end
  return { 1, redis.call('HGET', K_PROGRESS, id) }
end
local kept = redis.call('HGET', K_DONE_JOBS, id)
local newest = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, 1)
local info = newest[1] and redis.call('HGET', K_DEAD_INFO, newest[1])
if kept and info then
  local kept_at = tonumber(string.match(kept, '^%a (%d+)'))
  local died_at = tonumber(string.match(info, '^(%d+)'))
  if kept_at and died_at and died_at > kept_at then
    kept = false
  else
    info = false
  end
end
if kept then
  return { 2, kept }
end
if info then
  return { 3, info }
end
return { 0 }

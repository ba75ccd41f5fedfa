-- Looks a job up for a waiter (see JobStore::outcome): a live job first; else the newest of its end
-- told to waiters, its kept finish and its newest listed death (for a waiter that expects the job: its
-- told end, else a kept finish or death after `since`; the first such lookup forgets what an older
-- job of the id was told). Registers a waiter when asked: its id in `waited` until now + wait ms
-- (the later of two waits' ends) and `waits` set in stats, so that whatever ends the job announces and
-- tells it (outcomes.lua); for a live job (mode 1), or whether or not the job exists yet (mode 2: it is
-- about to be enqueued). Drops up to 16 waiters whose time ended.
-- ARGV: id, wait ms, mode (0 look, 1 wait for a live job, 2 expect it), since (ms; mode 2, 0 = now:
-- the first lookup).
-- Returns {1, now, progress|nil} live, {2, kept value} kept, {3, "<died at> <reason>"} dead, {4, told
-- value} told, {5, since} expected (mode 2, nothing ended since), {0} unknown.
outcome_helpers()
local id, wait, mode, since = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local now = now_ms()
-- Ends of other jobs of the id go back to before `since`.
local expect = mode == '2'
if not expect then
  since = -1
elseif since == 0 then
  since = now
  redis.call('HDEL', K_TOLD, id)
end

local function register()
  O.drop_waiters(now, 16)
  redis.call('ZADD', K_WAITED, 'GT', string.format('%d', now + wait), id)
  redis.call('HSET', K_STATS, 'waits', '1')
end

if redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id) then
  if mode ~= '0' then
    register()
  end
  return { 1, now, redis.call('HGET', K_PROGRESS, id) }
end

-- The newest end after `since`: {code, value, at}. A told end is this job's whatever its time.
local best = nil
local function consider(code, value, at)
  if value and at and at > since and (best == nil or at > best[3]) then
    best = { code, value, at }
  end
end
local told = redis.call('HGET', K_TOLD, id)
if told then
  best = { 4, told, tonumber(string.match(told, '^(%d+) ')) or 0 }
end
local kept = redis.call('HGET', K_DONE_JOBS, id)
consider(2, kept, kept and tonumber(string.match(kept, '^%a (%d+)')))
local newest = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, 1)
local info = newest[1] and redis.call('HGET', K_DEAD_INFO, newest[1])
consider(3, info, info and tonumber(string.match(info, '^(%d+)')))
if best then
  return { best[1], best[2] }
end
if mode == '2' then
  register()
  return { 5, since }
end
return { 0 }

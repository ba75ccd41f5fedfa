-- Finds a job by id: live first, then the newer of its kept finish and its newest listed death.
-- ARGV: id.
-- Returns {0} not found, {1, due time, record, stalls, progress} due, {2, lease deadline, record, stalls,
-- holder, progress} active,
-- {3, death, record, info ("<died at> <reason>"), delivered (0|1)} dead (its newest listed death),
-- {4, kept value (outcomes.lua)} kept, {5, due time, record, stalls, parents left ("<topic>\t<id>" per
-- line)} waiting for jobs.
local id = ARGV[1]
local s = redis.call('ZSCORE', K_DUE, id)
if s and tonumber(s) > MAX_MS then
  -- Waiting for jobs (deps.lua): the parents not yet counted, one per line.
  local info = redis.call('HGET', KEYS[25], id) or ''
  local left = {}
  for ref in string.gmatch(string.match(info, '\n(.*)$') or '', '[^\n]+') do
    if redis.call('HEXISTS', KEYS[26], id .. '\n' .. ref) == 0 then
      left[#left + 1] = ref
    end
  end
  return {
    5,
    tonumber(s),
    redis.call('HGET', K_JOBS, id),
    tonumber(redis.call('HGET', K_STALLS, id) or 0),
    table.concat(left, '\n'),
  }
end
if s then
  return {
    1,
    tonumber(s),
    redis.call('HGET', K_JOBS, id),
    tonumber(redis.call('HGET', K_STALLS, id) or 0),
    redis.call('HGET', K_PROGRESS, id),
  }
end
s = redis.call('ZSCORE', K_ACTIVE, id)
if s then
  return {
    2,
    tonumber(s),
    redis.call('HGET', K_JOBS, id),
    tonumber(redis.call('HGET', K_STALLS, id) or 0),
    lease_holder(redis.call('HGET', K_LEASES, id)),
    redis.call('HGET', K_PROGRESS, id),
  }
end
local newest = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, 1)
local kept = redis.call('HGET', K_DONE_JOBS, id)
if kept and newest[1] then
  local kept_at = tonumber(string.match(kept, '^%a (%d+)'))
  local died_at = tonumber(string.match(redis.call('HGET', K_DEAD_INFO, newest[1]) or '', '^(%d+)'))
  if not (kept_at and died_at and died_at > kept_at) then
    newest = {}
  end
end
if newest[1] then
  local d = newest[1]
  local pending = redis.call('ZSCORE', K_DEAD_PENDING, d)
  return {
    3,
    d,
    redis.call('HGET', K_DEAD_JOBS, d),
    redis.call('HGET', K_DEAD_INFO, d),
    pending and 0 or 1,
  }
end
if kept then
  return { 4, kept }
end
return { 0 }

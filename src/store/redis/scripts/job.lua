-- Finds a job (live first, then dead) by id.
-- ARGV: id.
-- Returns {0} not found, {1, due time, record} due, {2, lease deadline, record} active,
-- {3, died at, record, reason, delivered (0|1)} dead.
local id = ARGV[1]
local s = redis.call('ZSCORE', K_DUE, id)
if s then
  return { 1, tonumber(s), redis.call('HGET', K_JOBS, id) }
end
s = redis.call('ZSCORE', K_ACTIVE, id)
if s then
  return { 2, tonumber(s), redis.call('HGET', K_JOBS, id) }
end
s = redis.call('ZSCORE', K_DEAD, id)
if s then
  local pending = redis.call('ZSCORE', K_DEAD_PENDING, id)
  return {
    3,
    tonumber(s),
    redis.call('HGET', K_DEAD_JOBS, id),
    redis.call('HGET', K_DEAD_REASON, id),
    pending and 0 or 1,
  }
end
return { 0 }

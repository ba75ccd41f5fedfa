-- Finds a job (live first, then dead) by id.
-- ARGV: id.
-- Returns {0} not found, {1, due time, record, stalls} due, {2, lease deadline, record, stalls, holder}
-- active,
-- {3, death, record, info ("<died at> <reason>"), delivered (0|1)} dead (its newest listed death).
local id = ARGV[1]
local s = redis.call('ZSCORE', K_DUE, id)
if s then
  return { 1, tonumber(s), redis.call('HGET', K_JOBS, id), tonumber(redis.call('HGET', K_STALLS, id) or 0) }
end
s = redis.call('ZSCORE', K_ACTIVE, id)
if s then
  return {
    2,
    tonumber(s),
    redis.call('HGET', K_JOBS, id),
    tonumber(redis.call('HGET', K_STALLS, id) or 0),
    lease_holder(redis.call('HGET', K_LEASES, id)),
  }
end
local newest = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, 1)
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
return { 0 }

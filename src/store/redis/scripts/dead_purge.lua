-- Deletes one dead job, or all of them, pending hooks included.
-- ARGV: 'one', id | 'all'. Returns how many were deleted.
if ARGV[1] == 'all' then
  local n = redis.call('ZCARD', K_DEAD)
  redis.call('UNLINK', K_DEAD, K_DEAD_JOBS, K_DEAD_REASON, K_DEAD_PENDING)
  return n
end
local id = ARGV[2]
local n = redis.call('ZREM', K_DEAD, id)
redis.call('ZREM', K_DEAD_PENDING, id)
redis.call('HDEL', K_DEAD_JOBS, id)
redis.call('HDEL', K_DEAD_REASON, id)
return n

-- Cancels a live job by id.
-- ARGV: id. Returns 1 removed (it was due), 2 marked (it is running), 3 not found.
local id = ARGV[1]
if redis.call('ZSCORE', K_DUE, id) then
  redis.call('ZREM', K_DUE, id)
  redis.call('HDEL', K_JOBS, id)
  redis.call('HDEL', K_STALLS, id)
  redis.call('HINCRBY', K_STATS, 'cancelled', 1)
  return 1
end
if redis.call('ZSCORE', K_ACTIVE, id) then
  redis.call('SADD', K_CANCELS, id)
  return 2
end
return 3

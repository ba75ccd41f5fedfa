-- Moves a dead job back to due, due now, with a new record.
-- ARGV: channel, topic, id, record.
-- Returns {code, due at}: 1 requeued (due now), 0 no dead job has this id, 2 a live job has this id
-- (nothing changed).
local channel, topic, id, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if not redis.call('ZSCORE', K_DEAD, id) then
  return {0, 0}
end
if redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id) then
  return {2, 0}
end
redis.call('ZREM', K_DEAD, id)
redis.call('ZREM', K_DEAD_PENDING, id)
redis.call('HDEL', K_DEAD_JOBS, id)
redis.call('HDEL', K_DEAD_REASON, id)
local now = now_ms()
local first = earliest(K_DUE)
redis.call('HSET', K_JOBS, id, rec)
redis.call('ZADD', K_DUE, now, id)
hint_if_earlier(channel, topic, first, now)
return {1, now}

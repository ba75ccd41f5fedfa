-- Makes one death's job due again, due now, with a new record; the death leaves the listing (its hook,
-- if still pending, still sees it).
-- ARGV: channel, topic, death, id, record.
-- Returns {code, due at}: 1 requeued (due now), 0 no such listed death, 2 a live job has this id
-- (nothing changed).
local channel, topic, death, id, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not redis.call('ZSCORE', K_DEAD, death) then
  return { 0, 0 }
end
if redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id) then
  return { 2, 0 }
end
-- The job comes back under the key it died with (read before the death leaves the listing, which may
-- bury its record and key).
local key = redis.call('HGET', K_STATS, 'dkeys') and redis.call('HGET', K_DEAD_KEYS, death)
P().unlist_many({ death })
local now = now_ms()
local first = earliest(K_DUE)
redis.call('HSET', K_JOBS, id, rec)
redis.call('ZADD', K_DUE, now, id)
if fair_file_one(id, key or '', now, now) then
  first = nil
end
hint_if_earlier(channel, topic, first, now)
return { 1, now }

-- The namespace's registries (keys.rs): KEYS are `topics`, `workers`, `worker_info` (one slot), not a
-- topic's keys.
-- ARGV[1] says what to do:
--   'topic', name, partitions: records a topic (keeps the larger partition count). Returns 1.
--   'beat', id, info, ttl ms: a worker's heartbeat, alive until now + ttl. Returns 1.
--   'gone', id: removes a worker. Returns 1.
--   'workers': the live workers: three fields each, id, expires at (ms), "<beat ms> <info>".
-- 'beat' and 'workers' first remove up to 100 expired workers.
local K_TOPICS, K_WORKERS, K_WORKER_INFO = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
if op == 'topic' then
  local current = tonumber(redis.call('HGET', K_TOPICS, ARGV[2]) or '0')
  if current == nil or current < tonumber(ARGV[3]) then
    redis.call('HSET', K_TOPICS, ARGV[2], ARGV[3])
  end
  return 1
end
if op == 'gone' then
  redis.call('ZREM', K_WORKERS, ARGV[2])
  redis.call('HDEL', K_WORKER_INFO, ARGV[2])
  return 1
end
local now = now_ms()
local expired = redis.call('ZRANGE', K_WORKERS, '-inf', now, 'BYSCORE', 'LIMIT', 0, 100)
if #expired > 0 then
  call_many('ZREM', K_WORKERS, expired, 1)
  call_many('HDEL', K_WORKER_INFO, expired, 1)
end
if op == 'beat' then
  redis.call('ZADD', K_WORKERS, string.format('%d', now + tonumber(ARGV[4])), ARGV[2])
  redis.call('HSET', K_WORKER_INFO, ARGV[2], string.format('%d', now) .. ' ' .. ARGV[3])
  return 1
end
local live = redis.call('ZRANGE', K_WORKERS, '(' .. string.format('%d', now), '+inf', 'BYSCORE', 'WITHSCORES')
local ids = {}
for i = 1, #live, 2 do
  ids[#ids + 1] = live[i]
end
if #ids == 0 then
  return {}
end
local info = fetch_many('HMGET', K_WORKER_INFO, ids)
local out = {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = live[2 * i]
  out[#out + 1] = info[i] or ''
end
return out

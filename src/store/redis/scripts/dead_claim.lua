-- Takes dead jobs whose hook is due and pushes their pending time to now + lease.
-- ARGV: max, lease ms.
-- Returns four fields per job: id, died at, record, reason.
local max, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = now_ms()
local ids = redis.call('ZRANGE', K_DEAD_PENDING, '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
if #ids == 0 then
  return {}
end
local recs = fetch_many('HMGET', K_DEAD_JOBS, ids)
local reasons = fetch_many('HMGET', K_DEAD_REASON, ids)
local died = fetch_many('ZMSCORE', K_DEAD, ids)
local again, out = {}, {}
for i, id in ipairs(ids) do
  if recs[i] and died[i] then
    again[#again + 1] = now + lease
    again[#again + 1] = id
    out[#out + 1] = id
    out[#out + 1] = tonumber(died[i])
    out[#out + 1] = recs[i]
    out[#out + 1] = reasons[i] or ''
  else
    -- Pending without a dead job: nothing to deliver.
    redis.call('ZREM', K_DEAD_PENDING, id)
  end
end
if #out > 0 then
  -- Remove, then add (the ids are pending): a first write that cannot grow memory lets the hook's jobs
  -- through even when Redis is full (maxmemory, noeviction).
  local taken = {}
  for i = 2, #again, 2 do
    taken[#taken + 1] = again[i]
  end
  call_many('ZREM', K_DEAD_PENDING, taken, 1)
  call_many('ZADD', K_DEAD_PENDING, again, 2)
end
return out

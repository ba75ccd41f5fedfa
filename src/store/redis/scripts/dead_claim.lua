-- Takes deaths whose hook is due (listed or not) and pushes their pending time to now + lease.
-- ARGV: max, lease ms.
-- Returns three fields per death, as dead_list.lua.
local max, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = now_ms()
local deaths = redis.call('ZRANGE', K_DEAD_PENDING, '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
if #deaths == 0 then
  return {}
end
local recs = fetch_many('HMGET', K_DEAD_JOBS, deaths)
local info = fetch_many('HMGET', K_DEAD_INFO, deaths)
local taken, again, out = {}, {}, {}
for i, d in ipairs(deaths) do
  if recs[i] and info[i] then
    taken[#taken + 1] = d
    again[#again + 1] = now + lease
    again[#again + 1] = d
    out[#out + 1] = d
    out[#out + 1] = recs[i]
    out[#out + 1] = info[i]
  else
    -- Pending without its record (deleted outside postpone): nothing to deliver.
    redis.call('ZREM', K_DEAD_PENDING, d)
  end
end
if #out > 0 then
  -- Remove, then add (the deaths are pending): a first write that cannot grow memory lets the hook's
  -- jobs through even when Redis is full (maxmemory, noeviction).
  call_many('ZREM', K_DEAD_PENDING, taken, 1)
  call_many('ZADD', K_DEAD_PENDING, again, 2)
end
return out

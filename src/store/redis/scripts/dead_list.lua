-- Lists dead jobs (listed deaths), newest death first.
-- ARGV: offset, limit (1..1000).
-- Returns three fields per death: death ("<id>\n<seq>"), record, info ("<died at> <reason>").
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local deaths = redis.call('ZREVRANGE', K_DEAD, offset, offset + limit - 1)
if #deaths == 0 then
  return {}
end
local recs = fetch_many('HMGET', K_DEAD_JOBS, deaths)
local info = fetch_many('HMGET', K_DEAD_INFO, deaths)
local out = {}
for i, d in ipairs(deaths) do
  out[#out + 1] = d
  out[#out + 1] = recs[i] or ''
  out[#out + 1] = info[i] or ''
end
return out

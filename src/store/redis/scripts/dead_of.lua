-- Lists the listed deaths of one id, newest first.
-- ARGV: id, limit.
-- Returns three fields per death, as dead_list.lua.
local id, limit = ARGV[1], tonumber(ARGV[2])
-- Members "<id>\n<seq>": from "<id>\n" up to (not including) "<id>\v", the next byte after "\n".
local deaths = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, limit)
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

-- Marks the hooks of deaths done: they are no longer pending; the record and reason of a death that is
-- no longer listed (requeued or purged meanwhile) go too. Deaths that are not pending are ignored.
-- ARGV: deaths.
local deaths = ARGV
call_many('ZREM', K_DEAD_PENDING, deaths, 1)
local listed = fetch_many('ZMSCORE', K_DEAD, deaths)
local gone = {}
for i, d in ipairs(deaths) do
  if not listed[i] then
    gone[#gone + 1] = d
  end
end
if #gone > 0 then
  call_many('HDEL', K_DEAD_JOBS, gone, 1)
  call_many('HDEL', K_DEAD_INFO, gone, 1)
end
return #deaths

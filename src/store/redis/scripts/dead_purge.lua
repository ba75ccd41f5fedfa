-- Takes deaths off the dead letters: one, or the oldest up to 1000 of all (the caller repeats while
-- it gets 1000). Their hooks, if pending, still see them.
-- ARGV: 'one', death | 'all'. Returns how many were taken off.
local deaths
if ARGV[1] == 'all' then
  deaths = redis.call('ZRANGE', K_DEAD, 0, 999)
else
  deaths = {}
  if redis.call('ZSCORE', K_DEAD, ARGV[2]) then
    deaths[1] = ARGV[2]
  end
end
P().unlist_many(deaths)
return #deaths

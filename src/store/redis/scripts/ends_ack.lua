-- Forgets delivered ends (see ends_claim.lua); with the last, `ends` goes from stats.
-- KEYS: as ends_claim.lua. ARGV: end numbers.
local K_ENDS, K_END_INFO = KEYS[23], KEYS[24]
call_many('ZREM', K_ENDS, ARGV, 1)
call_many('HDEL', K_END_INFO, ARGV, 1)
if redis.call('ZCARD', K_ENDS) == 0 then
  redis.call('HDEL', K_STATS, 'ends')
end
return 0

-- Lists the listed deaths of one id, newest first.
-- ARGV: id, limit.
-- Returns three fields per death, as dead_list.lua.
local id, limit = ARGV[1], tonumber(ARGV[2])
-- Members "<id>\n<seq>": from "<id>\n" up to (not including) "<id>\v", the next byte after "\n".
local deaths = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, limit)
return P().death_entries(deaths)

-- Lists dead jobs (listed deaths), newest death first.
-- ARGV: offset, limit (1..1000).
-- Returns three fields per death: death ("<id>\n<seq>"), record, info ("<died at> <reason>").
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
return P().death_entries(redis.call('ZREVRANGE', K_DEAD, offset, offset + limit - 1))

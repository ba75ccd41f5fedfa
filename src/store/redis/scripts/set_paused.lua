-- Pauses or resumes claims of a topic (`paused` in stats; see claim.lua).
-- ARGV: '1' pause | '0' resume, channel, topic. A resume sends a hint due now, so that sleeping workers
-- claim at once.
if ARGV[1] == '1' then
  redis.call('HSET', K_STATS, 'paused', '1')
else
  redis.call('HDEL', K_STATS, 'paused')
  publish_hint(ARGV[2], ARGV[3], now_ms())
end
return 1

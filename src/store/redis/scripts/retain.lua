-- Records the topic's retention of finished jobs (`keep` in stats: "<max age ms> <max count>"; deleted
-- when none) and trims kept jobs beyond it, oldest first, at most `limit`; also drops up to `limit`
-- waiters whose time ended (and what they were told; `waits` with the last). See WorkerStore::retain.
-- ARGV: max age ms, max count (both '' for none), limit. Returns how many kept jobs went.
outcome_helpers()
local now = now_ms()
local limit = tonumber(ARGV[3])
local trimmed
if ARGV[1] == '' then
  redis.call('HDEL', K_STATS, 'keep')
  trimmed = O.trim_done(nil, nil, now, limit)
else
  local keep = ARGV[1] .. ' ' .. ARGV[2]
  if redis.call('HGET', K_STATS, 'keep') ~= keep then
    redis.call('HSET', K_STATS, 'keep', keep)
  end
  trimmed = O.trim_done(tonumber(ARGV[1]), tonumber(ARGV[2]), now, limit)
end
O.drop_waiters(now, limit)
return trimmed

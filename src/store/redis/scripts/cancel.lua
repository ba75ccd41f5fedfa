-- Cancels live jobs by id, each on its own, in order (one id, or the ids of coalesced calls).
-- ARGV: ids. Returns per id: 1 removed (it was due), 2 marked (it is running), 3 not found.
local out, removed = {}, 0
for i, id in ipairs(ARGV) do
  if redis.call('ZREM', K_DUE, id) == 1 then
    redis.call('HDEL', K_JOBS, id)
    redis.call('HDEL', K_STALLS, id)
    if redis.call('HDEL', K_PRIO, id) == 1 then
      redis.call('ZREM', K_PRIO_READY, id)
      redis.call('ZREM', K_PRIO_WAIT, id)
    end
    removed = removed + 1
    out[i] = 1
  elseif redis.call('ZSCORE', K_ACTIVE, id) then
    redis.call('SADD', K_CANCELS, id)
    out[i] = 2
  else
    out[i] = 3
  end
end
if removed > 0 then
  redis.call('HINCRBY', K_STATS, 'cancelled', removed)
end
return out

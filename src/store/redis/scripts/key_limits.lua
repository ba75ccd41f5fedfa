-- The limits of one key of a topic's keyed jobs, its own (`flimit`, see fair.lua and
-- OpsStore::set_key_limits), in place of the limits per key its claims give; or the list of them.
-- ARGV: 'set' | 'clear' | 'list', channel, topic, key, and for 'set' "<max running> <interval ms>
-- <burst> <label>" (the claim's arguments for limits per key, and their label).
-- `flim` in stats is set while `flimit` holds a key: the claim reads it with the stats it reads
-- anyway. Limits with a max running count every running job of the key in `frun` from now on, and
-- their leases name the key (fair.lua's F.counted_name): each end frees the slot its job now takes,
-- so a key running more than its new max starts nothing until it is under it. A key parked at its
-- max running (in neither `fready` nor `fwait`, with jobs queued) is made ready, and the claimers
-- hinted, so that its new limits apply at the next claim.
-- Returns: for 'list', key, label pairs; else 1.
fair_helpers()
local op, channel, topic = ARGV[1], ARGV[2], ARGV[3]
if op == 'list' then
  local all = redis.call('HGETALL', F_KEYS.LIMIT)
  local out = {}
  for i = 2, #all, 2 do
    local label, key = string.match(all[i], '^%S+ %S+ %S+ (%S+) (.*)$')
    if label then
      out[#out + 1] = key
      out[#out + 1] = label
    end
  end
  return out
end
local key = ARGV[4]
local name = key_name(key)
if op == 'set' then
  redis.call('HSET', F_KEYS.LIMIT, name, ARGV[5] .. ' ' .. key)
  redis.call('HSET', K_STATS, 'flim', '1')
  if tonumber(string.match(ARGV[5], '^%d+')) > 0 then
    -- The key's running jobs, among the topic's (an operator's step: the active set is read whole).
    local active, running = redis.call('ZRANGE', K_ACTIVE, 0, -1), 0
    for i = 1, #active, 1000 do
      local ids = { unpack(active, i, math.min(i + 999, #active)) }
      local recs = fetch_many('HMGET', K_JOBS, ids)
      local leases = fetch_many('HMGET', K_LEASES, ids)
      local recounted = {}
      for j = 1, #ids do
        if ids[j] ~= HASHED and leases[j] and record_key(recs[j]) == key then
          running = running + 1
          if F.counted_name(leases[j]) ~= name then
            -- Its lease names the key from now on, so that its end frees the slot it takes.
            local v = F.uncounted(leases[j]) and string.sub(leases[j], 1, -2) or leases[j] .. ':'
            recounted[#recounted + 1] = ids[j]
            recounted[#recounted + 1] = v .. 'c' .. name
          end
        end
      end
      if #recounted > 0 then
        call_many('HSET', K_LEASES, recounted, 2)
      end
    end
    if running > 0 then
      redis.call('HSET', F_KEYS.RUN, name, running)
    else
      redis.call('HDEL', F_KEYS.RUN, name)
    end
  end
else
  redis.call('HDEL', F_KEYS.LIMIT, name)
  if redis.call('EXISTS', F_KEYS.LIMIT) == 0 then
    redis.call('HDEL', K_STATS, 'flim')
  end
end
if not redis.call('ZSCORE', F_KEYS.READY, name) and not redis.call('ZSCORE', F_KEYS.WAIT, name)
  and F.has_queue(name) then
  redis.call('ZADD', F_KEYS.READY, redis.call('HGET', K_STATS, 'vt') or '0', name)
  publish_hint(channel, topic, now_ms())
end
return 1

-- The topic's periodic schedules (PeriodicStore::schedules), with this server's time.
-- KEYS: the topic's keys, then its schedules hash (last).
-- Returns: now, then two per schedule: name, stored schedule. (A topic has a few schedules: one HGETALL.)
local out = { now_ms() }
local all = redis.call('HGETALL', K_SCHEDULES)
for i = 1, #all do
  out[#out + 1] = all[i]
end
return out

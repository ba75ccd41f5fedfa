-- Stores a periodic schedule unless it exists with the same definition (PeriodicStore::schedule_upsert).
-- KEYS: the topic's keys, then its schedules hash (last).
-- ARGV: name, definition, first next tick (ms).
-- Returns: status (1 created, 2 unchanged, 3 replaced), now, the stored schedule.
-- redis.call: TIME, HGET, and HSET unless unchanged.
local name, def, first_next = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local v = redis.call('HGET', K_SCHEDULES, name)
local status = 1
local s = { next = first_next, def = def }
if v then
  local old = schedule_of(v)
  if old.def == def then
    return { 2, now, v }
  end
  status = 3
  s.last, s.trigger = old.last, old.trigger
end
v = schedule_str(s)
redis.call('HSET', K_SCHEDULES, name, v)
return { status, now, v }

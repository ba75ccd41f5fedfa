-- Asks for a run of a periodic schedule now (PeriodicStore::schedule_trigger): records this server's
-- time as its pending trigger, unless one is pending, and wakes the topic's workers.
-- KEYS: the topic's keys, then its schedules hash (last).
-- ARGV: channel, topic, name.
-- Returns the pending trigger (ms), or -1 when there is no such schedule.
-- redis.call: TIME, HGET, HSET, PUBLISH.
local channel, topic, name = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
local v = redis.call('HGET', K_SCHEDULES, name)
if not v then
  return -1
end
local s = schedule_of(v)
if not s.trigger then
  s.trigger = now
  redis.call('HSET', K_SCHEDULES, name, schedule_str(s))
end
publish_hint(channel, topic, now)
return s.trigger

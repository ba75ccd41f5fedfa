-- One tick decision of a periodic schedule (PeriodicStore::schedule_tick): enqueues a pending trigger,
-- then checks the caller's plan against the stored schedule (compare-and-set on its next and last ticks)
-- and this server's clock, and applies it: enqueues its due ticks' jobs and advances the next tick.
-- KEYS: the topic's keys, then its schedules hash (last).
-- ARGV: channel, topic, name, definition,
--       trigger tick ms|'', trigger job id, trigger record, trigger job's key for fairness|'',
--       plan '1'|'0', expected next, expected last|'-', the last tick's job id, new next,
--       overlap skip '1'|'0', grace ms|'-',
--       then four per run, oldest first: tick ms, job id, record, key for fairness|''.
-- Returns: status (0 no plan, 1 advanced, 2 moved, 3 early, 4 behind, 5 superseded, 6 gone), now,
-- jobs created, the stored schedule after the call ('' when gone).
-- redis.call: TIME, HGET, ZRANGE (earliest), then per job HSETNX and ZADD (and HEXISTS for an overlap
-- check), HSET when something changed, HINCRBY (history) when it created jobs, and PUBLISH when
-- a job is the topic's earliest.
local channel, topic, name, def = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
local v = redis.call('HGET', K_SCHEDULES, name)
if not v then
  return { 6, now, 0, '' }
end
local s = schedule_of(v)
if s.def ~= def then
  return { 5, now, 0, v }
end
local first = earliest(K_DUE)
local hint, created, changed = nil, 0, false
local function put(id, rec, tick, key)
  local at = put_tick(now, id, rec, tick, key)
  if at then
    created = created + 1
    if hint == nil or at < hint then
      hint = at
    end
  end
end

local trigger = tonumber(ARGV[5])
if trigger and s.trigger == trigger then
  -- An empty id: the caller could not build the job; the trigger is dropped.
  if ARGV[6] ~= '' then
    put(ARGV[6], ARGV[7], trigger, ARGV[8])
  end
  s.trigger = nil
  changed = true
end

local status = 0
if ARGV[9] == '1' then
  local expect, expect_last, last_id = tonumber(ARGV[10]), tonumber(ARGV[11]), ARGV[12]
  local new_next, overlap, grace = tonumber(ARGV[13]), ARGV[14] == '1', tonumber(ARGV[15])
  local runs = (#ARGV - 15) / 4
  local newest = expect
  if runs > 0 then
    newest = tonumber(ARGV[15 + (runs - 1) * 4 + 1])
  end
  if s.next ~= expect or s.last ~= expect_last then
    status = 2
  elseif newest > now then
    status = 3
  elseif new_next <= now then
    status = 4
  else
    local prev = nil
    if s.last and last_id ~= '' then
      prev = last_id
    end
    for i = 1, runs do
      local b = 15 + (i - 1) * 4
      local tick, id, rec, key = tonumber(ARGV[b + 1]), ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
      local late = grace and now - tick > grace
      local busy = overlap and prev and redis.call('HEXISTS', K_JOBS, prev) == 1
      if not late and not busy then
        put(id, rec, tick, key)
        s.last = tick
        prev = id
      end
    end
    s.next = new_next
    changed = true
    status = 1
  end
end
if changed then
  v = schedule_str(s)
  redis.call('HSET', K_SCHEDULES, name, v)
end
if created > 0 then
  tally(now, created, 0, 0, 0, 0)
end
hint_if_earlier(channel, topic, first, hint)
return { status, now, created, v }

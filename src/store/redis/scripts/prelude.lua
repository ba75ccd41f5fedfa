-- postpone: shared prelude, prepended to every script by scripts.rs.
--
-- KEYS are always the eleven keys of one topic, in the order of keys.rs (one hash tag, one slot).
-- Scripts never parse a record: records, ids and reasons are opaque strings here.
local K_DUE, K_ACTIVE, K_JOBS, K_LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STALLS, K_CANCELS, K_DEAD, K_DEAD_JOBS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_DEAD_REASON, K_DEAD_PENDING, K_STATS = KEYS[9], KEYS[10], KEYS[11]

-- Latest time a job may be due (9999-12-31, ms): keeps every score an exact integer in a double.
local MAX_MS = 253402300799999

-- Why a job whose record was deleted outside postpone is dead-lettered (with an empty record).
local DAMAGED = 'damaged: its record was missing from Redis (deleted outside postpone)'

-- Lua's unpack() takes at most ~8000 values: calls with a list argument go in slices of SLICE.
local SLICE = 4000

-- redis.call(cmd, key, [opt,] list...) in slices, each a multiple of `stride` values.
local function call_many(cmd, key, list, stride, opt)
  local step = SLICE - SLICE % stride
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    if opt then
      redis.call(cmd, key, opt, unpack(list, i, j))
    else
      redis.call(cmd, key, unpack(list, i, j))
    end
  end
end

-- redis.call(cmd, key, list...) in slices, the replies joined (HMGET, ZMSCORE, SMISMEMBER).
local function fetch_many(cmd, key, list)
  local out = {}
  for i = 1, #list, SLICE do
    local j = math.min(i + SLICE - 1, #list)
    local r = redis.call(cmd, key, unpack(list, i, j))
    for k = i, j do
      out[k] = r[k - i + 1]
    end
  end
  return out
end

-- The server's time in ms since the epoch.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The lowest score of a sorted set, or nil when it is empty.
local function earliest(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if r[2] then
    return tonumber(r[2])
  end
  return nil
end

-- A due time from ('in', delay ms) or ('at', absolute ms; the past means now).
local function resolve_due(now, kind, value)
  local at
  if kind == 'in' then
    at = now + value
  else
    at = value
    if at < now then
      at = now
    end
  end
  if at > MAX_MS then
    at = MAX_MS
  end
  return at
end

-- Wakes sleeping workers of the namespace: "<due ms> <topic>".
local function publish_hint(channel, topic, at)
  redis.call('PUBLISH', channel, string.format('%d', at) .. ' ' .. topic)
end

-- Sends a hint when `at` is earlier than `first`, the topic's earliest due time before the change.
local function hint_if_earlier(channel, topic, first, at)
  if at and (first == nil or at < first) then
    publish_hint(channel, topic, at)
  end
end

-- Adds jobs (already removed from due/active/jobs) to the dead letters, hook pending now.
local function kill_many(ids, recs, reasons, now)
  if #ids == 0 then
    return
  end
  local jobs, why, died = {}, {}, {}
  for i, id in ipairs(ids) do
    jobs[2 * i - 1] = id
    jobs[2 * i] = recs[i]
    why[2 * i - 1] = id
    why[2 * i] = reasons[i]
    died[2 * i - 1] = now
    died[2 * i] = id
  end
  call_many('HSET', K_DEAD_JOBS, jobs, 2)
  call_many('HSET', K_DEAD_REASON, why, 2)
  call_many('ZADD', K_DEAD, died, 2)
  call_many('ZADD', K_DEAD_PENDING, died, 2)
  redis.call('HINCRBY', K_STATS, 'dead', #ids)
end


-- postpone: shared prelude, prepended to every script by scripts.rs.
--
-- KEYS are always the eleven keys of one topic, in the order of keys.rs (one hash tag, one slot).
-- Scripts never parse a record: records, ids and reasons are opaque strings here.
local K_DUE, K_ACTIVE, K_JOBS, K_LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_STALLS, K_CANCELS, K_DEAD, K_DEAD_JOBS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_DEAD_REASON, K_DEAD_PENDING, K_STATS = KEYS[9], KEYS[10], KEYS[11]

-- Latest time a job may be due (9999-12-31, ms): keeps every score an exact integer in a double.
local MAX_MS = 253402300799999

-- A member of `active` and a field of `leases` while any job is active: no id can be it (ids hold no
-- control characters), and it is longer than Redis's largest listpack entry (64 bytes by default), so
-- while it is there both keys keep their hashed encodings (skiplist, hash table). In a listpack every
-- ZADD, ZREM, HSET, HMGET and HDEL scans the whole key: at 50 to 100 active jobs that cost 2.4 to
-- 3.2 us per claimed and finished job in `active` and 1.8 to 2.3 us in `leases`, against 0.9 and 0.8
-- us hashed. It sorts last in `active` (score +inf); it is added with a topic's first lease and
-- removed with its last, so a topic with no active job has neither key.
local HASHED = '\1postpone: not a job id; keeps this key in its hashed encoding (see prelude.lua)'

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

-- The lowest score of a sorted set, or nil when it is empty (or holds only the marker below).
local function earliest(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if r[2] and r[1] ~= HASHED then
    return tonumber(r[2])
  end
  return nil
end

-- Before leases are added: puts the marker in `active` and `leases`.
local function hashed_leases()
  redis.call('ZADD', K_ACTIVE, 'NX', '+inf', HASHED)
  redis.call('HSETNX', K_LEASES, HASHED, '')
end

-- After leases are removed: when only the marker is left, deletes `active` and `leases`.
local function drop_marker_if_last()
  if redis.call('ZCARD', K_ACTIVE) == 1 and redis.call('ZSCORE', K_ACTIVE, HASHED) then
    redis.call('DEL', K_ACTIVE, K_LEASES)
  end
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


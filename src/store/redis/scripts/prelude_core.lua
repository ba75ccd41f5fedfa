-- postpone: the core of the shared prelude (keys, constants, time, hints, history), prepended to every
-- script by scripts.rs; the rest (prelude.lua) to every script but enqueue_one.lua, the single enqueue,
-- which needs only this: every function defined here costs each call of a script sent by EVALSHA a
-- closure. As a function library (FCALL, Redis 7+; see scripts.rs) they are made once, when Redis
-- loads it, and the lines that read KEYS below are assigned at each call instead.
--
-- KEYS are the sixteen keys of one topic, in the order of keys.rs (one hash tag, one slot), and for the
-- claim script two more of the same topic: see claim.lua. Scripts never parse a record: records, ids
-- and reasons are opaque strings here.
local K_DUE, K_ACTIVE, K_JOBS, K_HISTORY = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_LEASES, K_STALLS, K_CANCELS, K_DEAD = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_DEAD_JOBS, K_DEAD_INFO, K_DEAD_PENDING = KEYS[9], KEYS[10], KEYS[11]
local K_STATS, K_DEAD_IDS = KEYS[12], KEYS[13]
local K_PRIO, K_PRIO_READY, K_PRIO_WAIT = KEYS[14], KEYS[15], KEYS[16]


-- Latest time a job may be due (9999-12-31, ms): keeps every score an exact integer in a double.
local MAX_MS = 253402300799999

-- A member of `active` and a field of `leases` while any job is active: no id can be it (ids hold no
-- control characters), and it is longer than Redis's largest listpack entry (64 bytes by default), so
-- while it is there both keys keep their hashed encodings (skiplist, hash table). In a listpack every
-- ZADD, ZREM, HSET, HMGET and HDEL scans the whole key: at 50 to 100 active jobs that cost 2.4 to
-- 3.2 us per claimed and finished job in `active` and 1.8 to 2.3 us in `leases`, against 0.9 and 0.8
-- us hashed. It sorts last in `active` (score +inf); it is added with a topic's first lease and
-- removed with its last, so a topic with no active job has neither key (but for FAIR_MARK below).
local HASHED = '\1postpone: not a job id; keeps this key in its hashed encoding (see prelude.lua)'

-- A member of `active` while the topic has keyed jobs (`fair` in stats; fair.lua), score +inf like
-- HASHED: a batch enqueue without a key asks for it in the ZMSCORE of `active` it makes anyway, so a
-- topic without keyed jobs pays no call to learn that it has none (an EXISTS of a key of its own cost
-- the coalesced enqueue of plain jobs 0.6 % of Redis's instructions per job, by callgrind); a script
-- without that read asks with one ZSCORE (fair_on). No id can be it either, and lease deadlines are finite: the members of
-- `active` scored +inf are its markers.
local FAIR_MARK = '\1postpone: the topic has keyed jobs (fair.lua)'

-- Why a job whose record was deleted outside postpone is dead-lettered (with an empty record).
local DAMAGED = 'damaged: its record was missing from Redis (deleted outside postpone)'

-- Lua's unpack() takes at most ~8000 values: calls with a list argument go in slices of SLICE.
local SLICE = 4000

-- redis.call(cmd, key, [opt,] list[from..to]...) in slices, each a multiple of `stride` values.
local function call_range(cmd, key, list, from, to, stride, opt)
  local step = SLICE - SLICE % stride
  for i = from, to, step do
    local j = math.min(i + step - 1, to)
    if opt then
      redis.call(cmd, key, opt, unpack(list, i, j))
    else
      redis.call(cmd, key, unpack(list, i, j))
    end
  end
end

-- redis.call(cmd, key, [opt,] list...) in slices, each a multiple of `stride` values.
local function call_many(cmd, key, list, stride, opt)
  call_range(cmd, key, list, 1, #list, stride, opt)
end

-- redis.call(cmd, key, list...) in slices, the replies joined (HMGET, ZMSCORE, SMISMEMBER).
local function fetch_many(cmd, key, list)
  local n = #list
  if n == 0 then
    return {}
  elseif n <= SLICE then
    -- One slice: the reply is the list.
    return redis.call(cmd, key, unpack(list, 1, n))
  end
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

-- The lowest score of a sorted set, or nil when it is empty (or holds only the markers above).
-- Numbers go to redis.call as strings: Redis 7.0 writes a Lua number argument with printf's %.17g
-- (some 4,000 instructions each); a literal costs nothing, and string.format('%d') a fraction.
local function earliest(key)
  local r = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
  if r[2] and r[1] ~= HASHED and r[1] ~= FAIR_MARK then
    return tonumber(r[2])
  end
  return nil
end

-- Appends to `got`, as id, due time pairs, the ids `ids` (the first of `due` by rank, all due) with
-- their due times as Redis writes them (an integer's digits). `first` is the due time of the first
-- (nil: read here). Redis 7.0 writes each score of a reply with printf's %.17g, some 4,000
-- instructions (a tenth of a drained job's Redis time), so the times are read once per run of equal
-- times (the jobs of a coalesced enqueue share one): a run's first time, then ZCOUNT says how many
-- share it. Once a run (other than a first given) holds one job, the rest are looked up at once
-- (ZMSCORE). Reads only: the caller removes the ids from `due` after.
local function with_due_times(ids, first, got)
  local n, g, i = #ids, #got, 1
  while i <= n do
    local given = first ~= nil
    local at = first or tonumber(redis.call('ZSCORE', K_DUE, ids[i]))
    first = nil
    if not at or at ~= math.floor(at) then
      -- Not a whole millisecond (not written by postpone): the rest as Redis writes them.
      break
    end
    local at_s = string.format('%d', at)
    -- ids[i] is at rank i - 1: the count of times up to its own is where its run ends.
    local upto = i
    if i < n then
      upto = math.min(redis.call('ZCOUNT', K_DUE, '-inf', at_s), n)
      if upto < i then
        break
      end
    end
    for j = i, upto do
      got[g + 1], got[g + 2], g = ids[j], at_s, g + 2
    end
    local len = upto - i + 1
    i = upto + 1
    if len == 1 and not given then
      break
    end
  end
  if i <= n then
    local rest = {}
    for j = i, n do
      rest[j - i + 1] = ids[j]
    end
    local dues = fetch_many('ZMSCORE', K_DUE, rest)
    for j = 1, #rest do
      got[g + 1], got[g + 2], g = rest[j], dues[j], g + 2
    end
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

-- Whether `due` holds no job due at or before `at_s` (ms, written as ZADD takes it): asked before jobs
-- due then are filed, it says whether they are the topic's earliest (sleeping workers then want a
-- hint). The enqueues ask this instead of reading the earliest due time (`earliest`): that reply's
-- score is written by Redis with printf's %.17g and read back by tonumber, and with the call's own
-- cost it was 15 % of a single enqueue's instructions (13,600 of 88,400; callgrind), this one ~half.
local function none_due_by(at_s)
  return #redis.call('ZRANGE', K_DUE, '-inf', at_s, 'BYSCORE', 'LIMIT', '0', '1') == 0
end

-- Small integers as redis.call takes them (counts; the ranks a claim reads its keys' queues at, in
-- fair.lua), written once each and kept from call to call by a function library (scripts.rs):
-- string.format makes and interns a string at every call.
local INT_S = {}

local function int_s(n)
  local s = INT_S[n]
  if not s then
    s = string.format('%d', n)
    if n >= 0 and n <= 1024 then
      INT_S[n] = s
    end
  end
  return s
end

-- How many minutes of history a topic keeps (HISTORY_MINUTES in store/ops.rs).
local HISTORY_MINUTES = 1500
-- A history field holds minute * HISTORY_SCALE + count: one HINCRBY counts, and tells whether the field
-- still held an older minute (then it is set afresh). Exact in a double until the year 2141, for counts
-- below 10^8 a minute.
local HISTORY_SCALE = 100000000
-- The five kinds, in the order of the counts: enqueued, processed, retried, failed, dead.
local HISTORY_KINDS = { 'e', 'p', 'r', 'f', 'd' }

-- The count in history field value `v` when it holds `minute`, else 0.
local function history_count(v, minute)
  v = tonumber(v)
  if not v or math.floor(v / HISTORY_SCALE) ~= minute then
    return 0
  end
  return v % HISTORY_SCALE
end

-- The fields of the last minute tallied (its slot's five, kept from call to call by a function
-- library as `INT_S` is): a field was written and joined at every tally, some 2,500 instructions of a
-- single enqueue's 88,000 (callgrind).
local TALLY_SLOT, TALLY_FIELDS = nil, {}

-- Counts `n` jobs of kind `k` (an index of HISTORY_KINDS) in this minute's history.
local function tally_one(minute, k, n)
  local field = TALLY_FIELDS[k]
  local v = redis.call('HINCRBY', K_HISTORY, field, int_s(n))
  if math.floor(v / HISTORY_SCALE) ~= minute then
    redis.call('HSET', K_HISTORY, field, string.format('%d', minute * HISTORY_SCALE + n))
  end
end

-- Adds to this minute's history (see keys.rs): enqueued, processed, retried, failed, dead. One HINCRBY
-- per kind counted (and an HSET when its field held the same minute of an earlier day). The five
-- counts are named and tested one by one: a table of them, or `select` in a loop, costs a single
-- enqueue 2,900 more instructions (3.6 %; callgrind).
local function tally(now, e, p, r, f, d)
  local minute = math.floor(now / 60000)
  local slot = minute % HISTORY_MINUTES
  if slot ~= TALLY_SLOT then
    local s = string.format('%d', slot)
    for k = 1, 5 do
      TALLY_FIELDS[k] = s .. HISTORY_KINDS[k]
    end
    TALLY_SLOT = slot
  end
  if e > 0 then
    tally_one(minute, 1, e)
  end
  if p > 0 then
    tally_one(minute, 2, p)
  end
  if r > 0 then
    tally_one(minute, 3, r)
  end
  if f > 0 then
    tally_one(minute, 4, f)
  end
  if d > 0 then
    tally_one(minute, 5, d)
  end
end

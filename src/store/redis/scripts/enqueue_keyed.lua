-- Enqueues jobs under keys (uniqueness windows, debounce), each on its own, in order: enqueue.lua's
-- body, which scripts.rs wraps as `enqueue_jobs(ARGV)`, run for each job whose key lets it through.
-- KEYS: the topic's sixteen, then `unique` (hash key -> "<id> <window end ms>"), `unique_until` (zset
-- key -> window end), `debounce` (hash key -> "<id> <created ms>"), `debounce_at` (zset key -> last
-- touched ms), all in the topic's slot.
-- ARGV: channel, topic, then per job twelve fields: enqueue.lua's six, then mode ('-' none, 'u' unique,
-- 'd' debounce), key, and three more: for 'u' window (ms), states (bits: 1 scheduled, 2 running,
-- 4 finished), unused; for 'd' quiet (ms), max wait (ms, 0: none), '1' to replace the record; then
-- the job's key for fairness ('': none; a debounced job pushed back keeps the key it was created
-- with).
-- Returns three fields per job: code, time, id: 1-4 as enqueue.lua (time: due), 5 duplicate (time: its
-- due, or -1 running), 6 throttled (time: the window's end), 7 debounced (time: the new due); the id
-- of the job that holds the key for 5-7, else ''.
-- Keys whose window ended, or whose debounced job is no longer live, are dropped, at most 100 each a
-- call.
local K_UNIQUE, K_UNIQUE_UNTIL, K_DEBOUNCE, K_DEBOUNCE_AT = KEYS[17], KEYS[18], KEYS[19], KEYS[20]
local channel, topic = ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 12
local now = now_ms()

local ended = redis.call('ZRANGEBYSCORE', K_UNIQUE_UNTIL, '-inf', now, 'LIMIT', 0, 100)
if #ended > 0 then
  call_many('ZREM', K_UNIQUE_UNTIL, ended, 1)
  call_many('HDEL', K_UNIQUE, ended, 1)
end
local touched = redis.call('ZRANGEBYSCORE', K_DEBOUNCE_AT, '-inf', '(' .. now, 'LIMIT', 0, 100)
for _, key in ipairs(touched) do
  local entry = redis.call('HGET', K_DEBOUNCE, key)
  local id = entry and string.match(entry, '^(.*) %d+$')
  if id and (redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id)) then
    redis.call('ZADD', K_DEBOUNCE_AT, now, key)
  else
    redis.call('ZREM', K_DEBOUNCE_AT, key)
    redis.call('HDEL', K_DEBOUNCE, key)
  end
end

-- "<id> <ms>" split.
local function entry_of(v)
  if not v then
    return nil
  end
  local id, ms = string.match(v, '^(.*) (%d+)$')
  return id, tonumber(ms)
end

local out = {}
local function reply(code, at, id)
  out[#out + 1] = code
  out[#out + 1] = at
  out[#out + 1] = id or ''
end

for i = 1, n do
  local b = 2 + (i - 1) * 12
  local mode, key = ARGV[b + 7], ARGV[b + 8]
  local a, c = tonumber(ARGV[b + 9]), ARGV[b + 11]
  local done = false
  if mode == 'u' then
    local id, ends = entry_of(redis.call('HGET', K_UNIQUE, key))
    if id and ends > now then
      local states = tonumber(ARGV[b + 10])
      local due = redis.call('ZSCORE', K_DUE, id)
      if due then
        if states % 2 == 1 then
          reply(5, tonumber(due), id)
          done = true
        end
      elseif redis.call('ZSCORE', K_ACTIVE, id) then
        if math.floor(states / 2) % 2 == 1 then
          reply(5, -1, id)
          done = true
        end
      elseif math.floor(states / 4) % 2 == 1 then
        reply(6, ends, id)
        done = true
      end
    end
  elseif mode == 'd' then
    local id, created = entry_of(redis.call('HGET', K_DEBOUNCE, key))
    if id and redis.call('ZSCORE', K_DUE, id) then
      local at = now + a
      local max_wait = tonumber(ARGV[b + 10])
      if max_wait > 0 and created + max_wait < at then
        at = created + max_wait
      end
      if at > MAX_MS then
        at = MAX_MS
      end
      redis.call('ZADD', K_DUE, string.format('%d', at), id)
      local prio = redis.call('HGET', K_PRIO, id)
      if prio then
        redis.call('ZREM', K_PRIO_READY, id)
        redis.call('ZREM', K_PRIO_WAIT, id)
        P().file_prio({ id }, { at }, { prio }, now)
      end
      -- Filed under its key (or the key '' when it has none, in a topic with keyed jobs): filed again
      -- by its new due time (fair.lua).
      if redis.call('HEXISTS', K_STATS, 'fair') == 1 then
        fair_helpers()
        F.refile({ id }, { at }, now)
      end
      if c == '1' then
        redis.call('HSET', K_JOBS, id, ARGV[b + 2])
      end
      redis.call('ZADD', K_DEBOUNCE_AT, now, key)
      reply(7, at, id)
      done = true
    end
  end
  if not done then
    local args = { channel, topic }
    for k = 1, 6 do
      args[k + 2] = ARGV[b + k]
    end
    args[9] = ARGV[b + 12]
    local r = enqueue_jobs(args)
    reply(r[1], r[2], '')
    if r[1] == 1 or r[1] == 2 then
      local id = ARGV[b + 1]
      if mode == 'u' then
        local ends = now + math.max(a, 1)
        if ends > MAX_MS then
          ends = MAX_MS
        end
        redis.call('HSET', K_UNIQUE, key, id .. ' ' .. string.format("%d", ends))
        redis.call('ZADD', K_UNIQUE_UNTIL, string.format('%d', ends), key)
      elseif mode == 'd' then
        redis.call('HSET', K_DEBOUNCE, key, id .. ' ' .. string.format('%d', now))
        redis.call('ZADD', K_DEBOUNCE_AT, now, key)
      end
    end
  end
end
return out

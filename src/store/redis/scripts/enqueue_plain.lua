-- Enqueues a batch of plain jobs (none replaces, none has a priority, all due 'in' or all 'at') into one
-- topic, each atomically, in order: enqueue.lua's outcomes for such a batch, with a third of the
-- arguments, four keys and the core prelude only (the coalesced enqueues of many concurrent callers take
-- this path, so per job and per call everything here counts).
-- KEYS: due, active, jobs, history (the first four of keys.rs).
-- ARGV: channel, topic, 'in'|'at', the due value (ms) shared by every job or '' when each has its own,
-- then per job: id, record, and its due value when there is no shared one.
-- Returns, when every job was created with one due time: that due time alone. Else two integers per
-- job: outcome (1 created, 3 exists, 4 running) and due time (ms).
-- redis.call per batch: TIME, 2 ZMSCORE, ZRANGE (earliest), HSET, ZADD, EXISTS (fkey: fair.lua),
-- HINCRBY (history), and PUBLISH when earlier.
local channel, topic, kind, shared = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local stride = 3
if shared ~= '' then
  stride = 2
end
local n = (#ARGV - 4) / stride
local now = now_ms()
local ids = {}
for i = 1, n do
  ids[i] = ARGV[4 + (i - 1) * stride + 1]
end
local active = fetch_many('ZMSCORE', K_ACTIVE, ids)
local due = fetch_many('ZMSCORE', K_DUE, ids)
local first = earliest(K_DUE)
local lowest, hint = first, nil
-- Due times by their argument, each with its score as ZADD takes it (an integer written once: a Lua
-- number handed to redis.call would be printed as a float and parsed back, for every job).
local scores = {}
local seen = {}
local jobs, zadd, out = {}, {}, {}
local created = 0
for i = 1, n do
  local id = ids[i]
  local current = seen[id]
  if current == nil and due[i] then
    current = tonumber(due[i])
  end
  if active[i] then
    out[2 * i - 1] = 4
    out[2 * i] = 0
  elseif current then
    out[2 * i - 1] = 3
    out[2 * i] = current
  else
    local value = shared
    if stride == 3 then
      value = ARGV[4 + (i - 1) * 3 + 3]
    end
    local score = scores[value]
    if score == nil then
      local at = resolve_due(now, kind, tonumber(value))
      score = { at, string.format('%d', at) }
      scores[value] = score
    end
    local at = score[1]
    jobs[#jobs + 1] = id
    jobs[#jobs + 1] = ARGV[4 + (i - 1) * stride + 2]
    zadd[#zadd + 1] = score[2]
    zadd[#zadd + 1] = id
    seen[id] = at
    created = created + 1
    out[2 * i - 1] = 1
    out[2 * i] = at
    if lowest == nil or at < lowest then
      lowest = at
      hint = at
    end
  end
end
if created > 0 then
  call_many('HSET', K_JOBS, jobs, 2)
  call_many('ZADD', K_DUE, zadd, 2)
  tally(now, created, 0, 0, 0, 0)
  -- A topic with keyed jobs files them under the key '' (fair.lua).
  if redis.call('EXISTS', K_FKEY) == 1 then
    fair_helpers()
    local u_ids, u_dues = {}, {}
    for i = 2, #zadd, 2 do
      u_ids[#u_ids + 1] = zadd[i]
      u_dues[#u_dues + 1] = tonumber(zadd[i - 1])
    end
    if fair_file_unkeyed(u_ids, u_dues, now) then
      first, hint = nil, now
    end
  end
end
hint_if_earlier(channel, topic, first, hint)
if created == n and next(scores) ~= nil and next(scores, next(scores)) == nil then
  return { out[2] }
end
return out

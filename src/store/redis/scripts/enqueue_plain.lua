-- Enqueues a batch of plain jobs (none replaces, none has a priority, all due 'in' or all 'at', no two
-- with one id: jobs.rs sends a batch with a repeated id to enqueue.lua) into one topic, each
-- atomically, in order: enqueue.lua's outcomes for such a batch, with a third of the arguments, four
-- keys and the core prelude only (the coalesced enqueues of many concurrent callers take this path, so
-- per job and per call everything here counts).
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
-- number handed to redis.call would be printed as a float and parsed back, for every job); a shared
-- one resolved once.
local scores = {}
local at, score = nil, nil
if stride == 2 then
  at = resolve_due(now, kind, tonumber(shared))
  score = string.format('%d', at)
end
local zadd = {}
-- `out` is written from the first job that is not created at the first one's time (`uniform`): until
-- then every outcome is that one, and the reply is that time alone.
local out, uniform = nil, nil
local created = 0
for i = 1, n do
  local code, time
  if active[i] then
    code, time = 4, 0
  elseif due[i] then
    code, time = 3, tonumber(due[i])
  else
    if stride == 3 then
      local value = ARGV[4 + (i - 1) * 3 + 3]
      local s = scores[value]
      if s == nil then
        local t = resolve_due(now, kind, tonumber(value))
        s = { t, string.format('%d', t) }
        scores[value] = s
      end
      at, score = s[1], s[2]
    end
    local k = 2 * created
    zadd[k + 1], zadd[k + 2] = score, ids[i]
    created = created + 1
    code, time = 1, at
    if lowest == nil or at < lowest then
      lowest = at
      hint = at
    end
  end
  if out == nil and (code ~= 1 or (uniform ~= nil and time ~= uniform)) then
    out = {}
    for j = 1, i - 1 do
      out[2 * j - 1], out[2 * j] = 1, uniform
    end
  end
  if out then
    out[2 * i - 1], out[2 * i] = code, time
  elseif uniform == nil then
    uniform = time
  end
end
if created == n and stride == 2 then
  -- Every job created, and the arguments after the fourth are its id, record pairs: HSET takes them as
  -- they came (no table of them).
  call_range('HSET', K_JOBS, ARGV, 5, #ARGV, 2)
elseif created > 0 then
  local jobs, k = {}, 0
  for i = 1, n do
    if not active[i] and not due[i] then
      local base = 4 + (i - 1) * stride
      jobs[k + 1], jobs[k + 2], k = ARGV[base + 1], ARGV[base + 2], k + 2
    end
  end
  call_many('HSET', K_JOBS, jobs, 2)
end
if created > 0 then
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
    if F.file_unkeyed(u_ids, u_dues, now) then
      first, hint = nil, now
    end
  end
end
hint_if_earlier(channel, topic, first, hint)
if out == nil then
  return { uniform }
end
return out

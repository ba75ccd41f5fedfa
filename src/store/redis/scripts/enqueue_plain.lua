-- Enqueues a batch of lean jobs (none replaces, none has a priority, all due 'in' or all 'at', no two
-- with one id: jobs.rs sends a batch with a repeated id to enqueue.lua) into one topic, each
-- atomically, in order: enqueue.lua's outcomes for such a batch, with a third of the arguments, four
-- keys and the core prelude only (the coalesced enqueues of many concurrent callers take this path, so
-- per job and per call everything here counts). Jobs with keys for fairness are filed under them as
-- enqueue.lua files them (fair.lua names its keys from `due`'s).
-- KEYS: due, active, jobs, history (the first four of keys.rs).
-- ARGV: channel, topic, 'in'|'at' ('in:k'|'at:k' when the jobs carry keys for fairness), the due value
-- (ms) shared by every job or '' when each has its own, then per job: id, record, its due value when
-- there is no shared one, and its key ('' for none) when they carry keys. (Keys are marked in the kind,
-- not by an argument of their own: a plain batch pays nothing for them.)
-- Returns, when every job was created with one due time: that due time alone. Else two integers per
-- job: outcome (1 created, 3 exists, 4 running) and due time (ms).
-- redis.call per batch: TIME, 2 ZMSCORE (the one of `active` also asks for FAIR_MARK: whether the topic
-- has keyed jobs, prelude_core.lua), ZRANGE (none_due_by), HSET, ZADD, HINCRBY (history), and PUBLISH
-- when earlier; jobs with keys add what fair.lua's `file` calls.
local channel, topic, kind, shared = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local keyed = false
if #kind == 4 then
  kind, keyed = string.sub(kind, 1, 2), true
end
-- The arguments before the first job's, and each job's count.
local HEAD = 4
local stride = 3
if shared ~= '' then
  stride = 2
end
-- Where a job's key is among its fields (when they carry keys).
local key_at = stride + 1
if keyed then
  stride = stride + 1
end
local n = (#ARGV - HEAD) / stride
local now = now_ms()
local ids = {}
for i = 1, n do
  ids[i] = ARGV[HEAD + (i - 1) * stride + 1]
end
-- Whether the topic has keyed jobs comes with the ids' leases, as one more member asked for (written
-- out here and in enqueue.lua: a function of the prelude would cost every script's call a
-- closure by EVALSHA).
ids[n + 1] = FAIR_MARK
local active = fetch_many('ZMSCORE', K_ACTIVE, ids)
local fair = active[n + 1] ~= false
ids[n + 1], active[n + 1] = nil, nil
local due = fetch_many('ZMSCORE', K_DUE, ids)
-- The lowest due time of the jobs created, and its score: whether they come before every job due
-- already is asked once, before they are filed (none_due_by).
local lowest, lowest_s = nil, nil
-- Due times by their argument, each with its score as ZADD takes it (an integer written once: a Lua
-- number handed to redis.call would be printed as a float and parsed back, for every job); a shared
-- one resolved once.
local scores = {}
local at, score = nil, nil
if shared ~= '' then
  at = resolve_due(now, kind, tonumber(shared))
  score = string.format('%d', at)
end
local zadd = {}
-- `out` is written from the first job that is not created at the first one's time (`uniform`): until
-- then every outcome is that one, and the reply is that time alone.
local out, uniform = nil, nil
local created = 0
-- Jobs created with a key (ids, keys, due times), and without one (filed under the key '' in a topic
-- with keyed jobs): made only for a batch that carries keys (a plain one's are made below when the
-- topic has keyed jobs).
local k_ids, k_keys, k_dues, u_ids, u_dues
if keyed then
  k_ids, k_keys, k_dues, u_ids, u_dues = {}, {}, {}, {}, {}
end
for i = 1, n do
  local code, time
  if active[i] then
    code, time = 4, 0
  elseif due[i] then
    code, time = 3, tonumber(due[i])
  else
    if shared == '' then
      local value = ARGV[HEAD + (i - 1) * stride + 3]
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
    if keyed then
      local key = ARGV[HEAD + (i - 1) * stride + key_at]
      if key ~= '' then
        local m = #k_ids + 1
        k_ids[m], k_keys[m], k_dues[m] = ids[i], key, at
      else
        u_ids[#u_ids + 1], u_dues[#u_dues + 1] = ids[i], at
      end
    end
    if lowest == nil or at < lowest then
      lowest, lowest_s = at, score
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
  -- Every job created, and the arguments after the head are its id, record pairs: HSET takes them as
  -- they came (no table of them).
  call_range('HSET', K_JOBS, ARGV, HEAD + 1, #ARGV, 2)
elseif created > 0 then
  local jobs, k = {}, 0
  for i = 1, n do
    if not active[i] and not due[i] then
      local base = HEAD + (i - 1) * stride
      jobs[k + 1], jobs[k + 2], k = ARGV[base + 1], ARGV[base + 2], k + 2
    end
  end
  call_many('HSET', K_JOBS, jobs, 2)
end
local hint = nil
if created > 0 then
  if none_due_by(lowest_s) then
    hint = lowest
  end
  call_many('ZADD', K_DUE, zadd, 2)
  tally(now, created, 0, 0, 0, 0)
end
-- Jobs with a key are filed under it, and in a topic with keyed jobs those without under the key ''
-- (fair.lua: after the keyed ones, which may be the topic's first).
local readied = false
if keyed then
  fair_helpers()
  if #k_ids > 0 then
    readied = F.file(k_ids, k_keys, k_dues, now)
  end
  readied = F.file_unkeyed(u_ids, u_dues, now) or readied
elseif created > 0 and fair then
  fair_helpers()
  u_ids, u_dues = {}, {}
  for i = 2, #zadd, 2 do
    u_ids[#u_ids + 1] = zadd[i]
    u_dues[#u_dues + 1] = tonumber(zadd[i - 1])
  end
  readied = F.file_unkeyed(u_ids, u_dues, now, true)
end
if readied then
  hint = now
end
if hint then
  publish_hint(channel, topic, hint)
end
if out == nil then
  return { uniform }
end
return out

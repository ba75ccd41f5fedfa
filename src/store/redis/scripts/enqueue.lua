-- Enqueues a batch of jobs into one topic, each atomically, in order.
-- ARGV: channel, topic, then per job seven fields: id, record, 'in'|'at', due value (ms), '1'|'0'
-- (replace), priority (0: none; 1 to 31, higher first: see keys.rs), key for fairness ('': none; see
-- fair.lua).
-- Returns two integers per job: outcome (1 created, 2 replaced, 3 exists, 4 running) and due time (ms).
-- redis.call per batch: TIME, 2 ZMSCORE (the one of `active` also asks for FAIR_MARK: whether the topic
-- has keyed jobs, prelude_core.lua), ZRANGE (earliest), HSET, ZADD, HINCRBY (history), and PUBLISH
-- when earlier. Jobs with a priority add HSET x2 and ZADD; replacing a job when any has one
-- adds EXISTS, HDEL and two ZREM. Jobs with a key add HGET (`vt`), HSET x2, ZADD and 2 or 3 calls per
-- key (fair.lua); replacing a job while the topic has keyed jobs adds HEXISTS, and HGET, HDEL, ZREM
-- and ZRANGE per job replaced.
local channel, topic = ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 7
local now = now_ms()
local ids = {}
for i = 1, n do
  ids[i] = ARGV[2 + (i - 1) * 7 + 1]
end
-- Whether the topic has keyed jobs comes with the ids' leases, as one more member asked for (written
-- out here and in enqueue_plain.lua: a function of the prelude would cost every script's call a
-- closure by EVALSHA).
ids[n + 1] = FAIR_MARK
local active = fetch_many('ZMSCORE', K_ACTIVE, ids)
local fair = active[n + 1] ~= false
ids[n + 1], active[n + 1] = nil, nil
local due = fetch_many('ZMSCORE', K_DUE, ids)
local first = earliest(K_DUE)
local earliest_now = first
local hint = nil
local seen = {}
local jobs, zadd, out = {}, {}, {}
-- Jobs written with a priority (ids, due times, priorities), and jobs replaced (with their due times
-- before).
local p_ids, p_dues, p_prios, replaced = {}, {}, {}, {}
-- Jobs written with a key (ids, keys, due times).
local k_ids, k_keys, k_dues = {}, {}, {}
-- Jobs written without one (filed under the key '' when the topic has keyed jobs).
local u_ids, u_dues = {}, {}
for i = 1, n do
  local b = 2 + (i - 1) * 7
  local id, rec, kind, value, replace = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4]), ARGV[b + 5]
  local current = seen[id]
  if current == nil and due[i] then
    current = tonumber(due[i])
  end
  if active[i] then
    out[2 * i - 1] = 4
    out[2 * i] = 0
  elseif current and (replace ~= '1' or current > MAX_MS) then
    out[2 * i - 1] = 3
    out[2 * i] = current
  else
    local at = resolve_due(now, kind, value)
    jobs[#jobs + 1] = id
    jobs[#jobs + 1] = rec
    zadd[#zadd + 1] = at
    zadd[#zadd + 1] = id
    seen[id] = at
    if current then
      replaced[#replaced + 1] = id
    end
    if ARGV[b + 7] ~= '' then
      k_ids[#k_ids + 1], k_keys[#k_keys + 1], k_dues[#k_dues + 1] = id, ARGV[b + 7], at
    else
      u_ids[#u_ids + 1], u_dues[#u_dues + 1] = id, at
    end
    local prio = ARGV[b + 6]
    if prio ~= '0' then
      p_ids[#p_ids + 1] = id
      p_dues[#p_dues + 1] = at
      p_prios[#p_prios + 1] = prio
    end
    out[2 * i - 1] = current and 2 or 1
    out[2 * i] = at
    if earliest_now == nil or at < earliest_now then
      earliest_now = at
      hint = at
    end
  end
end
-- A replaced job's key for fairness is in its record (fair.lua): read before the new one is written.
local replaced_recs = nil
if #replaced > 0 and redis.call('HEXISTS', K_STATS, 'fair') == 1 then
  replaced_recs = fetch_many('HMGET', K_JOBS, replaced)
end
if #jobs > 0 then
  call_many('HSET', K_JOBS, jobs, 2)
  call_many('ZADD', K_DUE, zadd, 2)
  local created = 0
  for i = 1, n do
    if out[2 * i - 1] == 1 then
      created = created + 1
    end
  end
  if created > 0 then
    tally(now, created, 0, 0, 0, 0)
  end
end
-- A replaced job's priority is the new one's (or none).
if #replaced > 0 and redis.call('EXISTS', K_PRIO) == 1 then
  call_many('HDEL', K_PRIO, replaced, 1)
  call_many('ZREM', K_PRIO_READY, replaced, 1)
  call_many('ZREM', K_PRIO_WAIT, replaced, 1)
end
if #p_ids > 0 then
  local fields = {}
  for i, id in ipairs(p_ids) do
    fields[2 * i - 1] = id
    fields[2 * i] = p_prios[i]
  end
  call_many('HSET', K_PRIO, fields, 2)
  redis.call('HSET', K_STATS, 'prio', '1')
  P().file_prio(p_ids, p_dues, p_prios, now)
end
-- A replaced job's key is the new one's (or none): its entry under the old one goes too (else, filed
-- again at the same due time under another key, it would look due under both, and be claimed twice).
if replaced_recs then
  fair_helpers()
  for i, id in ipairs(replaced) do
    F.cancel(id, replaced_recs[i])
  end
end
local readied = false
if #k_ids > 0 then
  fair_helpers()
  readied = F.file(k_ids, k_keys, k_dues, now)
end
-- Whether the topic has keyed jobs was read with the leases; keyed jobs filed just above may have made
-- it so.
if #u_ids > 0 and (fair or (#k_ids > 0 and fair_on())) then
  fair_helpers()
  readied = F.file_unkeyed(u_ids, u_dues, now, true) or readied
end
if readied then
  -- A key is ready now, maybe behind older jobs of held keys: claimers want to know.
  hint, first = now, nil
end
hint_if_earlier(channel, topic, first, hint)
return out

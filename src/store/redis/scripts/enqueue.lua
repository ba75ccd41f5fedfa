-- Enqueues a batch of jobs into one topic, each atomically, in order.
-- ARGV: channel, topic, then per job five fields: id, record, 'in'|'at', due value (ms), '1'|'0' (replace).
-- Returns two integers per job: outcome (1 created, 2 replaced, 3 exists, 4 running) and due time (ms).
-- redis.call per batch: TIME, 2 ZMSCORE, ZRANGE (earliest), HSET, ZADD, HINCRBY (history), and
-- PUBLISH when earlier.
local channel, topic = ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 5
local now = now_ms()
local ids = {}
for i = 1, n do
  ids[i] = ARGV[2 + (i - 1) * 5 + 1]
end
local active = fetch_many('ZMSCORE', K_ACTIVE, ids)
local due = fetch_many('ZMSCORE', K_DUE, ids)
local first = earliest(K_DUE)
local earliest_now = first
local hint = nil
local seen = {}
local jobs, zadd, out = {}, {}, {}
for i = 1, n do
  local b = 2 + (i - 1) * 5
  local id, rec, kind, value, replace = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4]), ARGV[b + 5]
  local current = seen[id]
  if current == nil and due[i] then
    current = tonumber(due[i])
  end
  if active[i] then
    out[2 * i - 1] = 4
    out[2 * i] = 0
  elseif current and replace ~= '1' then
    out[2 * i - 1] = 3
    out[2 * i] = current
  else
    local at = resolve_due(now, kind, value)
    jobs[#jobs + 1] = id
    jobs[#jobs + 1] = rec
    zadd[#zadd + 1] = at
    zadd[#zadd + 1] = id
    seen[id] = at
    out[2 * i - 1] = current and 2 or 1
    out[2 * i] = at
    if earliest_now == nil or at < earliest_now then
      earliest_now = at
      hint = at
    end
  end
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
hint_if_earlier(channel, topic, first, hint)
return out

-- Enqueues jobs at most once per delivery token (a transactional outbox's relay may deliver one row
-- twice): enqueue.lua's body, which scripts.rs wraps as `enqueue_jobs(ARGV)`, run on the jobs whose
-- token the topic has not recorded, and their tokens recorded in the same step.
-- KEYS: the topic's sixteen, then its `delivered` zset (token -> when recorded, ms).
-- ARGV: channel, topic, keep (ms), then per job eight fields: token, then enqueue.lua's seven (the
-- last: its key for fairness, '' for none).
-- Returns two integers per job: enqueue.lua's, or 0 0 when the token was recorded (delivered before).
-- Tokens recorded more than `keep` ms ago are dropped, at most 1000 a call.
local K_DELIVERED = KEYS[17]
local keep = tonumber(ARGV[3])
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', K_DELIVERED, '-inf', now - keep, 'LIMIT', 0, 1000)
if #old > 0 then
  call_many('ZREM', K_DELIVERED, old, 1)
end
local n = (#ARGV - 3) / 8
local tokens = {}
for i = 1, n do
  tokens[i] = ARGV[3 + (i - 1) * 8 + 1]
end
local recorded = fetch_many('ZMSCORE', K_DELIVERED, tokens)
local args, fresh, marks, taken = { ARGV[1], ARGV[2] }, {}, {}, {}
for i = 1, n do
  local token = tokens[i]
  if not recorded[i] and not taken[token] then
    taken[token] = true
    fresh[#fresh + 1] = i
    local b = 3 + (i - 1) * 8 + 1
    for k = 1, 7 do
      args[#args + 1] = ARGV[b + k]
    end
    marks[#marks + 1] = now
    marks[#marks + 1] = token
  end
end
local out = {}
for i = 1, 2 * n do
  out[i] = 0
end
if #fresh > 0 then
  local done = enqueue_jobs(args)
  for k, i in ipairs(fresh) do
    out[2 * i - 1] = done[2 * k - 1]
    out[2 * i] = done[2 * k]
  end
  call_many('ZADD', K_DELIVERED, marks, 2)
end
return out

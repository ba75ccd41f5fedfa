-- Counts how members ended (each once: a member no longer pending is left alone, so a delivery
-- repeated after a crash changes nothing), fires the death callback at the first death and completes
-- the batch when it is closed and every member ended (see batch_prelude.lua).
-- ARGV: per end, the member's ref and how it ended ('s', 'd' or 'c').
-- Returns how many callbacks fired (staged), or -1 when the batch is gone; then 1 when it is
-- completed (now or before), else 0.
if redis.call('EXISTS', K_BATCH) == 0 then
  return { -1, 1 }
end
local now = now_ms()
local refs = {}
for i = 1, #ARGV, 2 do
  refs[#refs + 1] = ARGV[i]
end
local scores = fetch_many('ZMSCORE', K_MEMBERS, refs)
local state = { s = 1, d = 2, c = 3 }
local field = { s = 'succeeded', d = 'dead', c = 'cancelled' }
local counts = { s = 0, d = 0, c = 0 }
local moved = {}
for k, ref in ipairs(refs) do
  local score = tonumber(scores[k])
  local kind = ARGV[2 * k]
  if score and score % 4 == 0 and state[kind] then
    moved[#moved + 1] = score + state[kind]
    moved[#moved + 1] = ref
    counts[kind] = counts[kind] + 1
  end
end
if #moved == 0 then
  return { 0, redis.call('HEXISTS', K_BATCH, 'completed') }
end
call_many('ZADD', K_MEMBERS, moved, 2)
for kind, n in pairs(counts) do
  if n > 0 then
    redis.call('HINCRBY', K_BATCH, field[kind], n)
  end
end
local fired = 0
if counts.d > 0 then
  fired = fire('death')
end
fired = fired + settle(now)
return { fired, redis.call('HEXISTS', K_BATCH, 'completed') }

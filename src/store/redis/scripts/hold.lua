-- Holds claims of a topic for a while (a provider's limit, reported by a job of another partition of
-- the topic: see finish.lua's 'hold'): `hold_until` in stats, never moved earlier.
-- ARGV: delay ms. Returns the hold's end (ms).
local until_ms = resolve_due(now_ms(), 'in', tonumber(ARGV[1]))
local held = tonumber(redis.call('HGET', K_STATS, 'hold_until'))
if held == nil or until_ms > held then
  redis.call('HSET', K_STATS, 'hold_until', string.format('%d', until_ms))
  return until_ms
end
return held

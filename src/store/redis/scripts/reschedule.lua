-- Moves a due job to a new due time; hints when it is now the topic's earliest.
-- ARGV: channel, topic, id, 'in'|'at', value (ms).
-- Returns {1, due time} rescheduled, {2, 0} running, {3, 0} not found.
local channel, topic, id = ARGV[1], ARGV[2], ARGV[3]
if redis.call('ZSCORE', K_DUE, id) then
  local at = resolve_due(now_ms(), ARGV[4], tonumber(ARGV[5]))
  local first = earliest(K_DUE)
  redis.call('ZADD', K_DUE, at, id)
  hint_if_earlier(channel, topic, first, at)
  return { 1, at }
end
if redis.call('ZSCORE', K_ACTIVE, id) then
  return { 2, 0 }
end
return { 3, 0 }

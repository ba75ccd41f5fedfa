-- Counts by state and the topic's counters.
-- Returns: scheduled, ready, active, dead, dead pending, then the counters processed, retried, failed,
-- dead, cancelled, stalled, trimmed, and paused (0|1).
local now = now_ms()
local total = redis.call('ZCARD', K_DUE)
local ready = redis.call('ZCOUNT', K_DUE, '-inf', now)
local out = {
  total - ready,
  ready,
  redis.call('ZCARD', K_ACTIVE) - (redis.call('ZSCORE', K_ACTIVE, HASHED) and 1 or 0),
  redis.call('ZCARD', K_DEAD),
  redis.call('ZCARD', K_DEAD_PENDING),
}
local stats = redis.call('HMGET', K_STATS, 'processed', 'retried', 'failed', 'dead', 'cancelled', 'stalled', 'trimmed', 'paused')
for i = 1, 8 do
  out[5 + i] = tonumber(stats[i] or 0)
end
return out

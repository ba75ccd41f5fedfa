-- Counts by state and the topic's counters.
-- Returns: scheduled, ready, active, dead, dead pending, then the counters processed, retried, failed,
-- dead, cancelled, stalled, trimmed, and paused (0|1); then the flow: rate jobs, rate period ms, max
-- running (each 0 when none), hold until (ms, 0 none), and the rate's TAT (ms, rounded down); the
-- store's now (ms); kept finished jobs (outcomes.lua's `done`); jobs waiting for jobs.
local now = now_ms()
local total = redis.call('ZCARD', K_DUE)
local ready = redis.call('ZCOUNT', K_DUE, '-inf', now)
-- Jobs waiting for jobs are in `due` too (deps.lua), not scheduled: KEYS[25] is `waiting`.
local waiting = redis.call('HLEN', KEYS[25])
local out = {
  total - ready - waiting,
  ready,
  redis.call('ZCARD', K_ACTIVE) - redis.call('ZCOUNT', K_ACTIVE, '+inf', '+inf'),
  redis.call('ZCARD', K_DEAD),
  redis.call('ZCARD', K_DEAD_PENDING),
}
local stats = redis.call('HMGET', K_STATS, 'processed', 'retried', 'failed', 'dead', 'cancelled', 'stalled', 'trimmed', 'paused', 'flow', 'hold_until', 'rate_tat')
for i = 1, 8 do
  out[5 + i] = tonumber(stats[i] or 0)
end
local flow = {}
for x in string.gmatch(stats[9] or '', '%d+') do
  flow[#flow + 1] = tonumber(x)
end
out[14], out[15], out[16] = flow[1] or 0, flow[2] or 0, flow[3] or 0
out[17] = tonumber(stats[10] or 0)
out[18] = math.floor(tonumber(stats[11] or 0))
out[19] = now
out[20] = redis.call('ZCARD', K_DONE)
out[21] = waiting
return out

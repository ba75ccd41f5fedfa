-- Hands a death to the hook again after a delay (its hook failed). Only a pending death: one whose hook
-- was acknowledged meanwhile (another worker's delivery) stays done.
-- ARGV: death, delay ms. Returns 1 when rescheduled, else 0.
return redis.call('ZADD', K_DEAD_PENDING, 'XX', 'CH', now_ms() + tonumber(ARGV[2]), ARGV[1]) > 0 and 1 or 0

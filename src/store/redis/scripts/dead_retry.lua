-- Puts a failed hook's dead job back in dead pending for now + delay.
-- ARGV: id, delay ms. Returns 1 when the job is still dead, else 0 (nothing changed).
local id = ARGV[1]
if not redis.call('ZSCORE', K_DEAD, id) then
  return 0
end
redis.call('ZADD', K_DEAD_PENDING, now_ms() + tonumber(ARGV[2]), id)
return 1

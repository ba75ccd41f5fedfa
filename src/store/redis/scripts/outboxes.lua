-- The reports of the namespace's transactional outboxes' relays (postpone-postgres). KEYS[1] is the
-- `outboxes` hash (keys.rs): name -> "<expires ms> <reported ms> <report>". Not a topic's keys.
-- ARGV[1] says what to do:
--   'put', name, report, ttl ms: records a report, kept until now + ttl. Returns 1.
--   'list': the reports not expired: three fields each, name, reported at (ms), report; expired ones
--   are removed. (A namespace has a few outboxes: the hash stays small.)
local K_OUTBOXES = KEYS[1]
local now = now_ms()
if ARGV[1] == 'put' then
  local value = string.format('%d %d ', now + tonumber(ARGV[4]), now) .. ARGV[3]
  redis.call('HSET', K_OUTBOXES, ARGV[2], value)
  return 1
end
local all = redis.call('HGETALL', K_OUTBOXES)
local out, expired = {}, {}
for i = 1, #all, 2 do
  local expires, at, report = string.match(all[i + 1], '^(%d+) (%d+) (.*)$')
  if expires == nil or tonumber(expires) <= now then
    expired[#expired + 1] = all[i]
  else
    out[#out + 1] = all[i]
    out[#out + 1] = tonumber(at)
    out[#out + 1] = report
  end
end
if #expired > 0 then
  redis.call('HDEL', K_OUTBOXES, unpack(expired))
end
return out

-- Renews leases to now + lease ms, each only if its token matches.
-- ARGV: lease ms, then per lease: id, token.
-- Returns one integer per lease: 1 held, 2 held but cancelled, 3 lost.
-- redis.call per batch: TIME, HMGET (leases), SCARD (cancels), [SMISMEMBER], ZREM and ZADD (active).
local deadline = now_ms() + tonumber(ARGV[1])
local n = (#ARGV - 1) / 2
local ids = {}
for i = 1, n do
  ids[i] = ARGV[2 * i]
end
local leases = fetch_many('HMGET', K_LEASES, ids)
local cancelled = {}
if redis.call('SCARD', K_CANCELS) > 0 then
  cancelled = fetch_many('SMISMEMBER', K_CANCELS, ids)
end
local out, held, zadd = {}, {}, {}
for i = 1, n do
  if held_by(leases[i], ARGV[2 * i + 1]) then
    held[#held + 1] = ids[i]
    zadd[#zadd + 1] = deadline
    zadd[#zadd + 1] = ids[i]
    out[i] = cancelled[i] == 1 and 2 or 1
  else
    out[i] = 3
  end
end
if #zadd > 0 then
  -- A matching token means the job is active under this claim (every script that ends a lease deletes
  -- its token). Remove, then add: the removal, which cannot grow memory, is the first write, so a full
  -- Redis (maxmemory, noeviction) still takes heartbeats; and a lease entry deleted outside postpone is
  -- put back instead of leaving the job in no set at all.
  call_many('ZREM', K_ACTIVE, held, 1)
  call_many('ZADD', K_ACTIVE, zadd, 2)
end
return out

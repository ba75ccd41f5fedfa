-- Deletes delivered dead jobs (hook succeeded) that died before a time or lie beyond the newest `keep`,
-- oldest first, at most `limit` (<= 1000). Both conditions select a prefix of the oldest-first order, so
-- the candidates are the longer prefix. Jobs whose hook is pending are skipped, never deleted; at most
-- SCAN_CAP candidates are looked at per call so the script stays short.
-- ARGV: max age (ms, or '' for no age rule), keep (or '' for no count rule), limit. Ages are judged by
-- the server's clock. Returns how many were deleted (counted in `trimmed`).
local SCAN_CAP, CHUNK = 5000, 500
local max_age, keep, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local by_count = 0
if keep then
  by_count = math.max(redis.call('ZCARD', K_DEAD) - keep, 0)
end
local by_age = 0
if max_age then
  by_age = redis.call('ZCOUNT', K_DEAD, '-inf', '(' .. string.format('%d', now_ms() - max_age))
end
local span = math.max(by_count, by_age)
if span > limit + SCAN_CAP then
  span = limit + SCAN_CAP
end
local victims = {}
local start = 0
while start < span and #victims < limit do
  local stop = math.min(start + CHUNK, span) - 1
  local ids = redis.call('ZRANGE', K_DEAD, start, stop)
  if #ids == 0 then
    break
  end
  local pending = redis.call('ZMSCORE', K_DEAD_PENDING, unpack(ids))
  for i, id in ipairs(ids) do
    if not pending[i] and #victims < limit then
      victims[#victims + 1] = id
    end
  end
  start = stop + 1
end
if #victims == 0 then
  return 0
end
call_many('ZREM', K_DEAD, victims, 1)
call_many('ZREM', K_DEAD_IDS, victims, 1)
call_many('HDEL', K_DEAD_JOBS, victims, 1)
P().bury_keys(victims)
call_many('HDEL', K_DEAD_INFO, victims, 1)
redis.call('HINCRBY', K_STATS, 'trimmed', #victims)
return #victims

-- Lists dead jobs, newest first.
-- ARGV: offset, limit (1..1000).
-- Returns four fields per dead job: id, died at, record, reason.
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local got = redis.call('ZREVRANGE', K_DEAD, offset, offset + limit - 1, 'WITHSCORES')
local k = #got / 2
if k == 0 then
  return {}
end
local ids = {}
for i = 1, k do
  ids[i] = got[2 * i - 1]
end
local recs = fetch_many('HMGET', K_DEAD_JOBS, ids)
local reasons = fetch_many('HMGET', K_DEAD_REASON, ids)
local out = {}
for i = 1, k do
  out[#out + 1] = ids[i]
  out[#out + 1] = tonumber(got[2 * i])
  out[#out + 1] = recs[i] or ''
  out[#out + 1] = reasons[i] or ''
end
return out

-- Takes up to `max` recorded ends of followed jobs (see outcomes.lua, `record_ends`) whose delivery is
-- due, and hides them from other callers for `lease` ms (they come back if the caller crashed).
-- KEYS: the topic's keys with outcomes (`ends` is KEYS[23], `end_info` KEYS[24]).
-- ARGV: max, lease (ms). Returns per end: its number, its info ("<s|c|d> <id len> <refs len>\n<id>
-- <refs><reason>"). With no end left, `ends` goes from stats.
local K_ENDS, K_END_INFO = KEYS[23], KEYS[24]
local now = now_ms()
local due = redis.call('ZRANGE', K_ENDS, '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]))
if #due == 0 then
  if redis.call('ZCARD', K_ENDS) == 0 then
    redis.call('HDEL', K_STATS, 'ends')
  end
  return {}
end
local later = string.format('%d', now + tonumber(ARGV[2]))
local hidden = {}
for i, seq in ipairs(due) do
  hidden[2 * i - 1] = later
  hidden[2 * i] = seq
end
call_many('ZADD', K_ENDS, hidden, 2)
local infos = fetch_many('HMGET', K_END_INFO, due)
local out = {}
for i, seq in ipairs(due) do
  out[#out + 1] = seq
  out[#out + 1] = infos[i] or ''
end
return out

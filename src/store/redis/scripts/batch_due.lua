-- Takes up to `max` batches whose recovery is due (see store/redis/workflow.rs) and puts each off by
-- `every` ms. KEYS: the namespace's `batch_check`. ARGV: max, every (ms). Returns their ids.
local now = now_ms()
local due = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]))
if #due > 0 then
  local later = string.format('%d', now + tonumber(ARGV[2]))
  local put_off = {}
  for i, id in ipairs(due) do
    put_off[2 * i - 1] = later
    put_off[2 * i] = id
  end
  call_many('ZADD', KEYS[1], put_off, 2, 'XX')
end
return due

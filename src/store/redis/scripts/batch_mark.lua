-- Lists a new batch (before it exists, so that recovery finds it whatever happens next): in the
-- namespace's `batches` (by creation) and `batch_check` (recovery looks at it after `every` ms).
-- KEYS: `batches`, `batch_check`. ARGV: the batch id, every (ms).
local now = now_ms()
redis.call('ZADD', KEYS[1], 'NX', now, ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', now + tonumber(ARGV[2]), ARGV[1])
return 0

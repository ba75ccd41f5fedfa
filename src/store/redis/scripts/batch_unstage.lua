-- Deletes staged entries known to be in their topics (see batch_prelude.lua); once the batch is
-- completed and nothing is staged, its keys expire after `keep` ms.
-- ARGV: keep (ms), then staged numbers.
-- Returns 1 when the batch is done with (completed, nothing staged, or gone), else 0.
if #ARGV > 1 then
  call_many('HDEL', K_STAGED, { unpack(ARGV, 2) }, 1)
end
local completed = redis.call('HGET', K_BATCH, 'completed')
if redis.call('EXISTS', K_BATCH) == 0 then
  return 1
end
if not completed or redis.call('HLEN', K_STAGED) > 0 then
  return 0
end
redis.call('PEXPIRE', K_BATCH, ARGV[1])
redis.call('PEXPIRE', K_MEMBERS, ARGV[1])
return 1

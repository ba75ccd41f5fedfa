-- Delivers parents' ends to jobs that wait for them (see deps.lua), each counted once per (job,
-- parent): a parent's success leaves one parent less, and with none left the job is due at its asked
-- time; a failure (death, cancel) applies the job's policy. An end for a job not parked yet is kept
-- (under its nonce) for the park to count (see deps.lua, `preheard`).
-- ARGV: channel, topic, then per end four fields: the job's id, the nonce, the parent's ref, and
-- how it ended ('s', 'c' or 'd' followed by the reason).
local channel, topic = ARGV[1], ARGV[2]
local now = now_ms()
for i = 3, #ARGV, 4 do
  local id, nonce, ref, ended = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local info = redis.call('HGET', K_WAITING, id)
  local w = info and parse_waiting(info)
  if not w or w.nonce ~= nonce then
    -- Not parked yet (or gone: then this is dropped with the job's other leftovers).
    if not w and not redis.call('ZSCORE', K_DUE, id) and not redis.call('ZSCORE', K_ACTIVE, id) then
      preheard(id .. '\n' .. nonce .. '\n' .. ref, ended, now)
    end
  elseif redis.call('HSETNX', K_HEARD, id .. '\n' .. ref, '1') == 1 then
    local kind = string.sub(ended, 1, 1)
    if kind == 's' or w.policy == 'run' then
      w.left = w.left - 1
      if w.left <= 0 then
        redis.call('HDEL', K_WAITING, id)
        forget_heard(id, w)
        make_due(channel, topic, id, w.kind, w.value, w.prio, w.key, now)
      else
        redis.call('HSET', K_WAITING, id, waiting_info(w))
      end
    else
      local rec = redis.call('HGET', K_JOBS, id) or ''
      redis.call('HDEL', K_WAITING, id)
      forget_heard(id, w)
      end_by_parent(channel, topic, id, rec, w.policy, parent_failure(ref, kind, string.sub(ended, 2)), now)
    end
  end
end
return 0

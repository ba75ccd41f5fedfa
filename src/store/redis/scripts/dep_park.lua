-- Enqueues a job that waits for parents (see deps.lua): its parents already follow it, or ended
-- before (their ends given here), or ended since they were followed (`heard`, under the nonce).
-- ARGV: channel, topic, id, record, 'in'|'at', due value, priority, policy ('dead_letter', 'cancel',
-- 'run'), nonce, key for fairness ('': none), then per parent: ref, 'live' or how it ended ('s', 'c',
-- 'd'), reason.
-- Returns {1, due time} due (every parent done), {2, parents left} waiting, {3, due time} a live job
-- has the id, {4, 0} it is running, {5, reason} dead-lettered, {6, 0} cancelled (a parent had failed).
local channel, topic, id, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local kind, value, prio, policy, nonce = ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local key = ARGV[10]
local now = now_ms()
local current = redis.call('ZSCORE', K_DUE, id)
if current then
  return { 3, tonumber(current) }
end
if redis.call('ZSCORE', K_ACTIVE, id) then
  return { 4, 0 }
end
local w = { nonce = nonce, policy = policy, left = 0, kind = kind, value = value, prio = prio, key = key, refs = {} }
local seen, counted, failed = {}, {}, nil
for i = 11, #ARGV, 3 do
  local ref, state, reason = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if not seen[ref] then
    seen[ref] = true
    w.refs[#w.refs + 1] = ref
    if state == 'live' then
      local pre = take_preheard(id .. '\n' .. nonce .. '\n' .. ref)
      if pre then
        state, reason = string.sub(pre, 1, 1), string.sub(pre, 2)
      end
    end
    if state == 'live' then
      w.left = w.left + 1
    elseif state == 's' or policy == 'run' then
      counted[#counted + 1] = ref
    elseif not failed then
      failed = parent_failure(ref, state, reason)
    end
  end
end
tally(now, 1, 0, 0, 0, 0)
if failed then
  if end_by_parent(channel, topic, id, rec, policy, failed, now) == 'd' then
    return { 5, failed }
  end
  return { 6, 0 }
end
redis.call('HSET', K_JOBS, id, rec)
if w.left == 0 then
  return { 1, make_due(channel, topic, id, kind, value, prio, key, now) }
end
redis.call('ZADD', K_DUE, string.format('%d', WAITING_MS), id)
redis.call('HSET', K_WAITING, id, waiting_info(w))
for _, ref in ipairs(counted) do
  redis.call('HSET', K_HEARD, id .. '\n' .. ref, '1')
end
return { 2, w.left }

-- Enqueues one job: enqueue.lua's outcomes for a batch of one, in fewer calls (the common single
-- enqueue, one round trip per job, so every call here counts).
-- KEYS: due, active, jobs, history (the first four of keys.rs; the others are not touched).
-- ARGV: channel, topic, id, record, 'in'|'at', due value (ms), '1'|'0' (replace), key for fairness
-- ('' or absent: none; a key never comes with a replace).
-- Returns outcome (1 created, 2 replaced, 3 exists, 4 running) and due time (ms; 0 when running).
-- redis.call for a new job: TIME, HSETNX, ZRANGE (none_due_by), ZADD, ZSCORE (FAIR_MARK: fair.lua), HINCRBY
-- (history) = 6, and PUBLISH when it is now the topic's earliest. (A live job, due or active, always
-- has its record in `jobs`: HSETNX both checks and stores.)
local channel, topic, id, rec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
local at = resolve_due(now, ARGV[5], tonumber(ARGV[6]))
local outcome = 1
if ARGV[7] == '1' then
  if redis.call('ZSCORE', K_ACTIVE, id) then
    return { 4, 0 }
  end
  local current = redis.call('ZSCORE', K_DUE, id)
  if current then
    if tonumber(current) > MAX_MS then
      -- Waiting for jobs (deps.lua): it stays as it is.
      return { 3, tonumber(current) }
    end
    outcome = 2
  end
  redis.call('HSET', K_JOBS, id, rec)
elseif redis.call('HSETNX', K_JOBS, id, rec) == 0 then
  if redis.call('ZSCORE', K_ACTIVE, id) then
    return { 4, 0 }
  end
  local current = redis.call('ZSCORE', K_DUE, id)
  if current then
    return { 3, tonumber(current) }
  end
  -- A record with no due or active entry breaks the invariant: store the job as new.
  redis.call('HSET', K_JOBS, id, rec)
end
local at_s = string.format('%d', at)
-- Asked before the job is filed (a replaced job's old entry counts, as before the change).
local hint = none_due_by(at_s)
redis.call('ZADD', K_DUE, at_s, id)
-- A job with a key is filed under it (fair.lua; never with a replace), and in a topic with keyed jobs
-- one without under the key ''.
if fair_file_one(id, ARGV[8] or '', at, now) then
  hint = true
end
if outcome == 1 then
  tally(now, 1, 0, 0, 0, 0)
end
if hint then
  publish_hint(channel, topic, at)
end
return { outcome, at }

-- Finds a job by id: live first, then the newer of its kept finish and its newest listed death.
-- ARGV: id.
-- Returns {0} not found, {1, due time, record, stalls, <key facts>, progress} due, {2, lease deadline,
-- record, stalls, <key facts>, holder, progress} active,
-- {3, death, record, info ("<died at> <reason>"), delivered (0|1), key} dead (its newest listed death),
-- {4, kept value (outcomes.lua)} kept, {5, due time, record, stalls, parents left ("<topic>\t<id>" per
-- line), key} waiting for jobs. `key` is the job's key for fairness, '' for none; <key facts> are its
-- key, that key's jobs queued, its running jobs, until when it is held back (ms, 0: not held:
-- key_held_until), its own limits (key_own_label, '' when none) and the limits per key of the last
-- claim (`kflow`, '' when none).
local id = ARGV[1]
-- A live job's key (its record's: fair.lua's record_key) and its key's state (see above).
local function key_facts(id)
  local key = record_key(redis.call('HGET', K_JOBS, id)) or ''
  if key == '' then
    return { '', 0, 0, 0, '', '' }
  end
  fair_helpers()
  local name = redis.sha1hex(key)
  return {
    key,
    select(2, F.queue_head(name, 0)),
    tonumber(redis.call('HGET', F_KEYS.RUN, name) or '0'),
    key_held_until(name, now_ms()),
    key_own_label(name),
    redis.call('HGET', K_STATS, 'kflow') or '',
  }
end
-- `reply` with `facts` and `rest` appended (`rest` may end early: a missing value).
local function with_facts(reply, facts, ...)
  for _, v in ipairs(facts) do
    reply[#reply + 1] = v
  end
  for _, v in ipairs({ ... }) do
    reply[#reply + 1] = v
  end
  return reply
end
local s = redis.call('ZSCORE', K_DUE, id)
if s and tonumber(s) > MAX_MS then
  -- Waiting for jobs (deps.lua): the parents not yet counted, one per line.
  local info = redis.call('HGET', KEYS[25], id) or ''
  local key = waiting_key(info)
  local left = {}
  for ref in string.gmatch(string.match(info, '\n(.*)$') or '', '[^\n]+') do
    if redis.call('HEXISTS', KEYS[26], id .. '\n' .. ref) == 0 then
      left[#left + 1] = ref
    end
  end
  return {
    5,
    tonumber(s),
    redis.call('HGET', K_JOBS, id),
    tonumber(redis.call('HGET', K_STALLS, id) or 0),
    table.concat(left, '\n'),
    key,
  }
end
if s then
  local record = redis.call('HGET', K_JOBS, id)
  if not record then
    return { 1, tonumber(s) }
  end
  local head = { 1, tonumber(s), record, tonumber(redis.call('HGET', K_STALLS, id) or 0) }
  return with_facts(head, key_facts(id), redis.call('HGET', K_PROGRESS, id))
end
s = redis.call('ZSCORE', K_ACTIVE, id)
if s then
  local record = redis.call('HGET', K_JOBS, id)
  if not record then
    return { 2, tonumber(s) }
  end
  local head = { 2, tonumber(s), record, tonumber(redis.call('HGET', K_STALLS, id) or 0) }
  local holder = lease_holder(redis.call('HGET', K_LEASES, id))
  return with_facts(head, key_facts(id), holder, redis.call('HGET', K_PROGRESS, id))
end
local newest = redis.call('ZRANGE', K_DEAD_IDS, '(' .. id .. '\v', '[' .. id .. '\n', 'BYLEX', 'REV', 'LIMIT', 0, 1)
local kept = redis.call('HGET', K_DONE_JOBS, id)
if kept and newest[1] then
  local kept_at = tonumber(string.match(kept, '^%a (%d+)'))
  local died_at = tonumber(string.match(redis.call('HGET', K_DEAD_INFO, newest[1]) or '', '^(%d+)'))
  if not (kept_at and died_at and died_at > kept_at) then
    newest = {}
  end
end
if newest[1] then
  local d = newest[1]
  local pending = redis.call('ZSCORE', K_DEAD_PENDING, d)
  return {
    3,
    d,
    redis.call('HGET', K_DEAD_JOBS, d),
    redis.call('HGET', K_DEAD_INFO, d),
    pending and 0 or 1,
    redis.call('HGET', K_DEAD_KEYS, d) or '',
  }
end
if kept then
  return { 4, kept }
end
return { 0 }

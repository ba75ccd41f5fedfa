-- Finishes claimed jobs, each only if its token matches its current lease (see Finish in store/mod.rs).
-- ARGV: channel, topic, then per item: id, token, kind, and for kind 'retry' or 'dead' three more:
--   'done':  id, token, 'done'
--   'result': id, token, 'result', the handler's result (encoded), '', '' (a 'done' with a result)
--   'retry': id, token, 'retry', record, delay ms, '1'|'0' (count it in `retried`)
--   'dead':  id, token, 'dead', record, reason, ''
--   'hold':  id, token, 'hold', record, delay ms, '' (a provider's rate limit: a retry counted as
--            nothing, and no job of the topic is claimed before it is due: `hold_until` in stats)
-- A finish that ends a lease while `full` is set in stats (a claim found the topic, or a key, at its
-- max running) clears it and sends a hint: a slot is free. So does one that makes a key ready.
-- Jobs that end (done, cancelled, dead) are kept when the topic keeps finished jobs (`keep` in stats:
-- succeeded and cancelled ones, with their record and result), announced to their waiters (`waits`),
-- their progress forgotten (`progress`), and the ends of those that batches follow recorded
-- (`follow`): see outcomes.lua. Without any of the four, that costs four more fields of the HMGET of
-- stats below.
-- Returns one integer per item: 1 applied, 2 cancelled, 3 stale.
-- redis.call per batch of done jobs: TIME, HMGET (leases), SCARD (cancels), ZREM (active), HDEL (leases),
-- ZCARD (active: the marker of prelude.lua goes with the last lease), EXISTS (stalls), HDEL (jobs),
-- HINCRBY (processed), HINCRBY (history), HMGET (`full` and `prio` in stats) = 11, and HDEL (stalls) when a job of the topic ever stalled. Retries add ZRANGE, HSET, ZADD and HINCRBY; dead jobs add HSET x2, ZADD x2 and HINCRBY x2.
local channel, topic = ARGV[1], ARGV[2]
local now = now_ms()
-- Where each item starts in ARGV.
local ids, at_arg = {}, {}
local b, n = 2, 0
while b < #ARGV do
  n = n + 1
  ids[n], at_arg[n] = ARGV[b + 1], b
  b = b + (ARGV[b + 3] == 'done' and 3 or 6)
end
local leases = fetch_many('HMGET', K_LEASES, ids)
local any_cancels = redis.call('SCARD', K_CANCELS) > 0
local cancelled = {}
if any_cancels then
  cancelled = fetch_many('SMISMEMBER', K_CANCELS, ids)
end

local out, seen = {}, {}
local gone, ended = {}, {}
-- How each ended job ended ('s' succeeded, 'c' cancelled, 'd' dead) and its result or reason, by its
-- place in `ended`: written only where it is not 's' and '' (a success without a result, the usual
-- end), and completed before they are read (only when outcomes.lua is wanted).
local ended_kind, ended_data = {}, {}
local retry_jobs, retry_due = {}, {}
local dead_ids, dead_recs, dead_reasons = {}, {}, {}
local processed, retried, n_cancelled = 0, 0, 0
-- How many `gone` and `ended` hold: counts, not `#`, which Lua finds by a binary search.
local n_gone, n_ended = 0, 0
local first_retry = nil
local hold_until = nil
-- Holds asked by handlers (ids, until when): the job's key's when it has one (fair.lua), else the
-- topic's.
local hold_ids, hold_untils = {}, {}
-- `full`, `prio`, `keep`, `waits`, `progress`, `follow` and `fair` in stats (read once the batch's
-- leases are gone).
local flags = { false, false, false, false, false, false, false }
for i = 1, n do
  local b = at_arg[i]
  local id, token, kind = ids[i], ARGV[b + 2], ARGV[b + 3]
  if seen[id] or not held_by(leases[i], token) then
    out[i] = 3
  else
    seen[id] = true
    n_gone = n_gone + 1
    gone[n_gone] = id
    out[i] = 1
    if kind == 'done' or kind == 'result' then
      n_ended = n_ended + 1
      ended[n_ended] = id
      if kind == 'result' then
        ended_data[n_ended] = ARGV[b + 4]
      end
      processed = processed + 1
    elseif kind == 'retry' or kind == 'hold' then
      if kind == 'hold' then
        hold_ids[#hold_ids + 1] = id
        hold_untils[#hold_untils + 1] = resolve_due(now, 'in', tonumber(ARGV[b + 5]))
      end
      if cancelled[i] == 1 then
        n_ended = n_ended + 1
        ended[n_ended], ended_kind[n_ended] = id, 'c'
        n_cancelled = n_cancelled + 1
        out[i] = 2
      else
        local at = resolve_due(now, 'in', tonumber(ARGV[b + 5]))
        retry_jobs[#retry_jobs + 1] = id
        retry_jobs[#retry_jobs + 1] = ARGV[b + 4]
        retry_due[#retry_due + 1] = at
        retry_due[#retry_due + 1] = id
        if ARGV[b + 6] == '1' then
          retried = retried + 1
        end
        if first_retry == nil or at < first_retry then
          first_retry = at
        end
      end
    else
      n_ended = n_ended + 1
      ended[n_ended], ended_kind[n_ended], ended_data[n_ended] = id, 'd', ARGV[b + 5]
      dead_ids[#dead_ids + 1] = id
      dead_recs[#dead_recs + 1] = ARGV[b + 4]
      dead_reasons[#dead_reasons + 1] = ARGV[b + 5]
    end
  end
end

if n_gone > 0 then
  call_many('ZREM', K_ACTIVE, gone, 1)
  call_many('HDEL', K_LEASES, gone, 1)
  drop_marker_if_last()
  flags = redis.call('HMGET', K_STATS, 'full', 'prio', 'keep', 'waits', 'progress', 'follow', 'fair')
  if flags[1] then
    redis.call('HDEL', K_STATS, 'full')
    publish_hint(channel, topic, now)
  end
end
-- In a topic with keyed jobs, the keys of the jobs held, retried or dead (id -> key, false for none):
-- their stored records' (fair.lua's record_key), read before those are replaced or deleted. A retry's
-- record from the worker carries the key it was claimed with; one that does not gets it (a store's
-- own caller may send any record).
local keys_of = nil
if flags[7] and (#hold_ids > 0 or #retry_jobs > 0 or #dead_ids > 0) then
  -- A hold is a retry too, unless its job was cancelled: each id once.
  local some, listed = {}, {}
  for i = 1, #retry_jobs, 2 do
    some[#some + 1], listed[retry_jobs[i]] = retry_jobs[i], true
  end
  for _, id in ipairs(hold_ids) do
    if not listed[id] then
      some[#some + 1] = id
    end
  end
  for _, id in ipairs(dead_ids) do
    some[#some + 1] = id
  end
  local recs = fetch_many('HMGET', K_JOBS, some)
  keys_of = {}
  for i, id in ipairs(some) do
    keys_of[id] = record_key(recs[i]) or false
  end
  for i = 2, #retry_jobs, 2 do
    local key = keys_of[retry_jobs[i - 1]]
    if key then
      retry_jobs[i] = with_record_key(retry_jobs[i], key)
    end
  end
end
if #hold_ids > 0 then
  if keys_of then
    fair_helpers()
  end
  for i = 1, #hold_ids do
    local key = keys_of and keys_of[hold_ids[i]]
    if key then
      F.hold(key, hold_untils[i])
    elseif hold_until == nil or hold_untils[i] > hold_until then
      hold_until = hold_untils[i]
    end
  end
end
if hold_until then
  local held = tonumber(redis.call('HGET', K_STATS, 'hold_until'))
  if held == nil or hold_until > held then
    redis.call('HSET', K_STATS, 'hold_until', string.format('%d', hold_until))
  end
end
if n_ended > 0 then
  if flags[3] or flags[4] or flags[5] or flags[6] then
    outcome_helpers()
    for i = 1, n_ended do
      ended_kind[i], ended_data[i] = ended_kind[i] or 's', ended_data[i] or ''
    end
    local recs = flags[3] and fetch_many('HMGET', K_JOBS, ended) or {}
    O.after_end(flags[3], flags[4], flags[5], flags[6], channel, topic, ended, ended_kind, ended_data, recs, now)
  end
  call_many('HDEL', K_JOBS, ended, 1)
  if redis.call('EXISTS', K_STALLS) == 1 then
    call_many('HDEL', K_STALLS, ended, 1)
  end
  if any_cancels then
    call_many('SREM', K_CANCELS, ended, 1)
  end
end
if #retry_jobs > 0 then
  local first = earliest(K_DUE)
  call_many('HSET', K_JOBS, retry_jobs, 2)
  call_many('ZADD', K_DUE, retry_due, 2)
  hint_if_earlier(channel, topic, first, first_retry)
end
-- Jobs with a priority keep it through a retry; jobs that end forget it.
if (#retry_due > 0 or n_ended > 0) and flags[2] then
  if #retry_due > 0 then
    local r_ids, r_dues = {}, {}
    for i = 1, #retry_due, 2 do
      r_dues[#r_dues + 1] = retry_due[i]
      r_ids[#r_ids + 1] = retry_due[i + 1]
    end
    P().file_prio(r_ids, r_dues, fetch_many('HMGET', K_PRIO, r_ids), now)
  end
  if n_ended > 0 then
    call_many('HDEL', K_PRIO, ended, 1)
  end
end
-- Keyed jobs keep their keys through a retry (in the records the worker sent back: fair.lua), and
-- those that die keep them with their deaths.
-- A key made ready (a parked key's lease ended, or a retry is due now) wakes the claimers, once.
local dead_keys = nil
if n_gone > 0 and flags[7] then
  fair_helpers()
  if #dead_ids > 0 then
    dead_keys = {}
    for i, id in ipairs(dead_ids) do
      dead_keys[i] = keys_of[id]
    end
  end
  -- The lease values of the jobs in `gone`, in its order (whether each counted under its key): made
  -- only when some key counts its running jobs.
  local readied = F.release(gone, function()
    local gone_leases, m = {}, 0
    for i = 1, n do
      if out[i] ~= 3 then
        m = m + 1
        gone_leases[m] = leases[i]
      end
    end
    return gone_leases
  end, now)
  local r_ids, r_dues, r_keys = {}, {}, {}
  for i = 1, #retry_due, 2 do
    r_dues[#r_dues + 1] = retry_due[i]
    r_ids[#r_ids + 1] = retry_due[i + 1]
    r_keys[#r_keys + 1] = keys_of[retry_due[i + 1]]
  end
  readied = F.refile(r_ids, r_dues, now, r_keys) or readied
  if readied and not flags[1] then
    publish_hint(channel, topic, now)
  end
end
if #dead_ids > 0 then
  P().kill_many(dead_ids, dead_recs, dead_reasons, now, dead_keys)
  redis.call('HINCRBY', K_STATS, 'failed', #dead_ids)
end
if processed > 0 then
  redis.call('HINCRBY', K_STATS, 'processed', string.format('%d', processed))
end
if processed + retried + #dead_ids > 0 then
  tally(now, 0, processed, retried, #dead_ids, #dead_ids)
end
if retried > 0 then
  redis.call('HINCRBY', K_STATS, 'retried', retried)
end
if n_cancelled > 0 then
  redis.call('HINCRBY', K_STATS, 'cancelled', n_cancelled)
end
return out

-- Sweeps expired leases, then claims due jobs under the caller's lease token (see WorkerStore::claim).
-- KEYS: the topic's sixteen, the eleven of outcomes.lua, then this claim's record ("<prefix>claim:<token>") and the record of the
-- previous claim whose reply the caller received ("<prefix>claim:0" when none): see below.
-- ARGV: max, lease ms, sweep limit, stall limit, token, again ('1' when this claim was sent before and
-- its reply was lost), holder (the claiming worker's number, kept in each lease for operators), max
-- running (0: no limit), the rate limit's emission interval in ms ('0': no limit) and its burst, and
-- the limits as "<jobs>/<per ms>/<max running>" (kept as `flow` in stats for operators, written when it
-- changes), the wake channel and the topic (for the announcements of jobs the sweep ends).
-- Returns: now, swept, swept_dead, next due|nil, next lease deadline|nil, pending (1: a dead job waits
-- for its hook, + 2: ends of followed jobs wait for delivery, `ends` in stats), token,
-- the microseconds of now past its millisecond (0-999), paused (0|1), held back (0 no, 1 max running,
-- 2 rate, 3 provider), then three fields per claimed job: id, due time, record.
--
-- Flow control (read with `paused`, only when something is due): at most `max running` jobs active
-- (the marker of prelude.lua not counted); a GCRA rate limit whose TAT is `rate_tat` in stats (see
-- flow.rs: a job may go while the TAT is less than `burst` intervals ahead of now); a provider's
-- limit, `hold_until` in stats (finish.lua), before which nothing is claimed. A claim held back by the
-- rate or a hold reports the time the next job may go as its next due time; one held back by max
-- running reports none and sets `full` in stats, so that the finish that frees a slot sends a hint.
--
-- A paused topic (`paused` in stats) is swept, and a claim sent again still gets back what it took,
-- but nothing new is claimed, and when jobs are due no next due time is reported (its workers wait for
-- the resume's hint, or their poll interval).
--
-- A claim that takes jobs records their ids under its token until its lease would end (a key of the
-- topic's slot), and the caller's next claim deletes it. A claim sent again after its reply was lost
-- finds that record and hands back the jobs still leased under its token instead of claiming more: a
-- lost reply leaves nothing leased to nobody and costs no stall.
-- redis.call per batch: TIME, ZRANGE (earliest lease), ZRANGE (earliest due), HMGET (paused, flow, ends), ZRANGE
-- (due <= now), ZREMRANGEBYRANK, ZADD and HSETNX (the marker of prelude.lua), ZADD (active), HSET
-- (leases), HMGET (records), GET and SET (the claim's record), ZRANGE (next due), ZRANGE (dead pending)
-- = 15 whatever the batch size, plus the due times read once per run of jobs sharing one (ZCOUNT for
-- a batch of two or more, then ZSCORE and ZCOUNT per further run, or one ZMSCORE for the rest after a
-- run of one: see with_due_times), and DEL (the previous claim's record) when the caller names one; a
-- call that finds nothing due makes 5 (HGET of `ends`). A sweep that finds expired leases adds 5 calls, plus 1 to 4 per expired lease (rare: a
-- worker died or stalled). Flow control adds ZCARD and ZSCORE (max running), HSET (the rate's TAT).
local max, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local sweep_limit, stall_limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local token_s, again, holder = ARGV[5], ARGV[6] == '1', ARGV[7]
local max_running, interval, burst = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local flow_label, channel, topic = ARGV[11], ARGV[12], ARGV[13]
-- Limits per key (fair.lua): max running (0: none), the rate's emission interval ms ('0': none), burst,
-- and as "<jobs>/<per ms>/<max running>" (kept as `kflow` in stats for operators while the topic has
-- keyed jobs, written when it changes).
local key_max, key_interval, key_burst = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local key_label = ARGV[17]
local K_CLAIM, K_RECEIVED = KEYS[28], KEYS[29]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Now as redis.call takes it (see earliest in prelude_core.lua), written once.
local now_s = string.format('%d', now)
local now_us_part = tonumber(time[2]) % 1000
local swept, swept_dead = 0, 0

local next_lease = earliest(K_ACTIVE)
if sweep_limit > 0 and next_lease and next_lease <= now then
  local expired = redis.call('ZRANGE', K_ACTIVE, '-inf', now, 'BYSCORE', 'LIMIT', 0, sweep_limit)
  local held = fetch_many('HMGET', K_LEASES, expired)
  call_many('ZREM', K_ACTIVE, expired, 1)
  call_many('HDEL', K_LEASES, expired, 1)
  local cancelled = fetch_many('SMISMEMBER', K_CANCELS, expired)
  local back = {}
  local dead_ids, dead_recs, dead_reasons = {}, {}, {}
  local n_cancelled = 0
  local cancelled_ids, cancelled_recs = {}, {}
  for i, id in ipairs(expired) do
    local stalls = redis.call('HINCRBY', K_STALLS, id, 1)
    if cancelled[i] == 1 then
      redis.call('SREM', K_CANCELS, id)
      cancelled_ids[#cancelled_ids + 1] = id
      cancelled_recs[#cancelled_ids] = redis.call('HGET', K_JOBS, id) or ''
      redis.call('HDEL', K_JOBS, id)
      redis.call('HDEL', K_STALLS, id)
      n_cancelled = n_cancelled + 1
      swept_dead = swept_dead + 1
    elseif stalls > stall_limit then
      local rec = redis.call('HGET', K_JOBS, id)
      redis.call('HDEL', K_JOBS, id)
      redis.call('HDEL', K_STALLS, id)
      local reason = 'stalled: lease expired ' .. string.format('%d', stalls) .. ' times'
      if not rec then
        rec = ''
        reason = reason .. '; ' .. DAMAGED
      end
      dead_ids[#dead_ids + 1] = id
      dead_recs[#dead_recs + 1] = rec
      dead_reasons[#dead_reasons + 1] = reason
      swept_dead = swept_dead + 1
    else
      -- Due again at the due time it was claimed at: it keeps its place in line.
      back[#back + 1] = lease_due(held[i]) or now
      back[#back + 1] = id
      swept = swept + 1
    end
  end
  if #back > 0 then
    call_many('ZADD', K_DUE, back, 2)
    redis.call('HINCRBY', K_STATS, 'stalled', swept)
  end
  -- A job with a priority keeps it (due again, at its place in line); one that ended forgets it.
  if redis.call('EXISTS', K_PRIO) == 1 then
    local b_ids, b_dues, ended = {}, {}, {}
    for i = 1, #back, 2 do
      b_dues[#b_dues + 1] = back[i]
      b_ids[#b_ids + 1] = back[i + 1]
    end
    for i, id in ipairs(expired) do
      if cancelled[i] == 1 then
        ended[#ended + 1] = id
      end
    end
    for _, id in ipairs(dead_ids) do
      ended[#ended + 1] = id
    end
    if #b_ids > 0 then
      P().file_prio(b_ids, b_dues, fetch_many('HMGET', K_PRIO, b_ids), now)
    end
    P().forget_prio(ended)
  end
  -- A keyed job's lease ended (its key runs one fewer); back in `due`, it is filed again under its
  -- key (its record's: see fair.lua), and one that died keeps it with its death.
  local dead_keys = nil
  if redis.call('HGET', K_STATS, 'fair') then
    fair_helpers()
    dead_keys = {}
    for i, rec in ipairs(dead_recs) do
      dead_keys[i] = record_key(rec) or false
    end
    F.release(expired, held, now)
    local b_ids, b_dues = {}, {}
    for i = 1, #back, 2 do
      b_dues[#b_dues + 1] = tonumber(back[i])
      b_ids[#b_ids + 1] = back[i + 1]
    end
    F.refile(b_ids, b_dues, now)
  end
  if n_cancelled > 0 then
    redis.call('HINCRBY', K_STATS, 'cancelled', n_cancelled)
  end
  P().kill_many(dead_ids, dead_recs, dead_reasons, now, dead_keys)
  if #dead_ids > 0 then
    tally(now, 0, 0, 0, 0, #dead_ids)
  end
  if #cancelled_ids + #dead_ids > 0 then
    -- Ended by the sweep: kept, announced and their progress forgotten as in finish.lua.
    local flags = redis.call('HMGET', K_STATS, 'keep', 'waits', 'progress', 'follow')
    if flags[1] or flags[2] or flags[3] or flags[4] then
      outcome_helpers()
      local ended, kinds, data, recs = {}, {}, {}, {}
      for i, id in ipairs(cancelled_ids) do
        ended[i], kinds[i], data[i], recs[i] = id, 'c', '', cancelled_recs[i]
      end
      for i, id in ipairs(dead_ids) do
        local k = #cancelled_ids + i
        ended[k], kinds[k], data[k] = id, 'd', dead_reasons[i]
      end
      O.after_end(flags[1], flags[2], flags[3], flags[4], channel, topic, ended, kinds, data, recs, now)
    end
  end
  drop_marker_if_last()
  next_lease = earliest(K_ACTIVE)
end

if K_RECEIVED ~= K_CLAIM then
  redis.call('DEL', K_RECEIVED)
end
local token = 0
-- The reply: ten fields filled in at the end, then three per claimed job, appended at `o` (a count, not
-- `#reply`, which Lua finds by a binary search; and no second table to copy them from).
local reply = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
local o = 10
local next_due = earliest(K_DUE)
-- Whether the topic is paused matters only when something is due now (a paused topic's later jobs are
-- reported as usual, and the claim at their time finds it paused): an idle claim does not read it.
local paused = false
-- Why due jobs were held back (0: they were not), the TAT a rate-limited claim starts from, and the
-- time a held-back job may go.
local held, tat, go_at = 0, nil, nil
-- Whether any job may have a priority (`prio` in stats: set by an enqueue with one, cleared here once
-- none is left).
local has_prio = false
-- `ends` in stats (ends of followed jobs wait for delivery), read with the flow fields when they are.
local ends = nil
-- `fair` in stats: some job may have a key (fair.lua); `flim`: some key has limits of its own.
local has_fair, has_own = false, false
-- `vt`, `flegacy` and `fskip` in stats (fair.lua), read with them for the keyed claim.
local vt, flegacy, fskip = nil, nil, false
-- Whether the keyed claim left a key ready (its next due time is now), and the jobs it counted as
-- running under their keys (id -> its key's name; the others' leases are marked uncounted).
local fair_ready, counted = false, nil
if max > 0 and next_due and next_due <= now then
  local st = redis.call('HMGET', K_STATS, 'paused', 'hold_until', 'rate_tat', 'flow', 'prio', 'ends', 'fair', 'kflow', 'flim', 'vt', 'flegacy', 'fskip')
  has_prio = st[5] ~= false
  vt, flegacy, fskip = st[10] or nil, st[11] or nil, st[12] ~= false
  ends = st[6]
  has_fair = st[7] ~= false
  if has_fair then
    counted = {}
  end
  has_own = st[9] ~= false
  paused = st[1] == '1'
  if st[4] ~= flow_label and (st[4] or flow_label ~= '0/0/0') then
    redis.call('HSET', K_STATS, 'flow', flow_label)
  end
  if has_fair and st[8] ~= key_label then
    redis.call('HSET', K_STATS, 'kflow', key_label)
  end
  local hold = tonumber(st[2])
  if paused then
    max = 0
  elseif hold and hold > now then
    max, held, go_at = 0, 3, hold
  else
    if max_running > 0 then
      -- Less the markers (prelude_core.lua), the members scored +inf.
      local running = redis.call('ZCARD', K_ACTIVE)
      if running > 0 then
        running = running - redis.call('ZCOUNT', K_ACTIVE, '+inf', '+inf')
      end
      if running >= max_running then
        max, held = 0, 1
        redis.call('HSET', K_STATS, 'full', '1')
      elseif max_running - running < max then
        max = max_running - running
      end
    end
    if max > 0 and interval > 0 then
      tat = math.max(tonumber(st[3]) or 0, now)
      local allowed = math.floor((now - tat) / interval + burst + 1e-9)
      if allowed < max then
        max = math.max(allowed, 0)
      end
    end
  end
end
-- A token names one claim: when its record exists, this is that claim again (sent again after a lost
-- reply, or its first send arriving late, after the second, on another connection), and it hands back
-- the jobs still leased under the token instead of claiming more. Looked up only when the caller says
-- so or there is something to claim, so that an idle claim stays at 5 calls.
local recorded = nil
if again or (max > 0 and next_due and next_due <= now) then
  recorded = redis.call('GET', K_CLAIM)
end
if recorded then
  token = token_s
  local ids = {}
  for id in string.gmatch(recorded, '[^\n]+') do
    ids[#ids + 1] = id
  end
  local leases = fetch_many('HMGET', K_LEASES, ids)
  local recs = fetch_many('HMGET', K_JOBS, ids)
  for i, id in ipairs(ids) do
    if held_by(leases[i], token_s) and recs[i] then
      reply[o + 1], reply[o + 2], reply[o + 3] = id, string.format('%d', lease_due(leases[i])), recs[i]
      o = o + 3
    end
  end
elseif max > 0 and next_due and next_due <= now then
  -- Jobs with a priority first (keys.rs): due ones move from `prio_wait` to `prio_ready` (as many as
  -- this claim could take, and more, so that `prio_ready` keeps up), then the highest go, each only if
  -- it is still due at the time its entry says (else the entry is stale: cancelled, rescheduled,
  -- replaced, claimed in due order).
  local got = {}
  if has_prio and redis.call('EXISTS', K_PRIO) == 0 then
    redis.call('HDEL', K_STATS, 'prio')
  elseif has_prio then
    local wait = redis.call('ZRANGE', K_PRIO_WAIT, '-inf', now, 'BYSCORE', 'LIMIT', 0, math.max(4 * max, 256), 'WITHSCORES')
    if #wait > 0 then
      local w_ids, w_dues = {}, {}
      for i = 1, #wait, 2 do
        w_ids[#w_ids + 1] = wait[i]
        w_dues[#w_dues + 1] = tonumber(wait[i + 1])
      end
      redis.call('ZREMRANGEBYRANK', K_PRIO_WAIT, 0, #w_ids - 1)
      P().file_prio(w_ids, w_dues, fetch_many('HMGET', K_PRIO, w_ids), now)
    end
    local ready = redis.call('ZRANGE', K_PRIO_READY, 0, max - 1, 'WITHSCORES')
    if #ready > 0 then
      redis.call('ZREMRANGEBYRANK', K_PRIO_READY, 0, #ready / 2 - 1)
      local r_ids = {}
      for i = 1, #ready, 2 do
        r_ids[#r_ids + 1] = ready[i]
      end
      local dues = fetch_many('ZMSCORE', K_DUE, r_ids)
      local taken = {}
      for i, id in ipairs(r_ids) do
        local at = P().prio_due(ready[2 * i])
        if dues[i] and tonumber(dues[i]) == at then
          got[#got + 1] = id
          got[#got + 1] = string.format('%d', at)
          taken[#taken + 1] = id
        end
      end
      if #taken > 0 then
        call_many('ZREM', K_DUE, taken, 1)
        if has_fair and (key_max > 0 or has_own) then
          -- A keyed job claimed by its priority still counts against its key's max running.
          fair_helpers()
          F.count(taken, counted)
        end
      end
    end
  end
  if has_fair then
    fair_helpers()
    local idle = redis.call('EXISTS', F_KEYS.READY, F_KEYS.WAIT, F_KEYS.RUN) == 0
    if idle then
      -- Rates and holds that have passed say nothing more (the keyed claim drops them only under
      -- limits that use them).
      redis.call('ZREMRANGEBYSCORE', F_KEYS.TAT, '-inf', now_s)
      redis.call('ZREMRANGEBYSCORE', F_KEYS.HOLD, '-inf', now_s)
      idle = redis.call('EXISTS', F_KEYS.TAT, F_KEYS.HOLD) == 0
    end
    if idle then
      -- No key has a job filed, a job it counts as running, a rate that holds it back or a hold: the
      -- topic claims as a plain one again (a keyed job still running comes back to `due` unfiled if
      -- it does; once another keyed job sets `fair` again, fair_unkeyed takes it: see fair.lua).
      redis.call('HDEL', K_STATS, 'fair', 'vt', 'flegacy', 'kflow', 'fskip')
      redis.call('ZREM', K_ACTIVE, FAIR_MARK)
      has_fair = false
    end
  end
  if has_fair then
    -- Jobs without a key among the first due go in due order; then keyed jobs round-robin by key.
    local legacy = false
    if #got / 2 < max then
      legacy = F.unkeyed(max - #got / 2, now, got, flegacy)
    end
    if #got / 2 < max then
      fair_ready = F.claim(max - #got / 2, now, got, key_max, key_interval, key_burst, legacy, has_own, vt,
        #got == 0 and next_due or nil, counted, fskip)
    end
  elseif #got / 2 < max then
    local more = redis.call('ZRANGE', K_DUE, '-inf', now_s, 'BYSCORE', 'LIMIT', '0', string.format('%d', max - #got / 2))
    if #more > 0 then
      -- The head's due time is `next_due` unless jobs with a priority just left `due`.
      with_due_times(more, #got == 0 and next_due or nil, got)
      -- The claimed ids are exactly the lowest ranks. Removing them is the first write: when Redis is
      -- full (maxmemory, noeviction) it refuses a script whose first write may grow memory, and a
      -- claim, which only moves jobs, must still run then, or a full Redis could never be drained.
      redis.call('ZREMRANGEBYRANK', K_DUE, '0', string.format('%d', #more - 1))
    end
  end
  local k = #got / 2
  if k > 0 then
    token = token_s
    local deadline = now + lease
    -- Numbers go to redis.call as strings made once: Redis would format each with %.17g.
    local deadline_s = string.format('%d', deadline)
    local ids, active, leases = {}, {}, {}
    -- Jobs with one due time (a run: see with_due_times) share one lease value, made once (a joined
    -- string is hashed and interned whole). In a topic with keyed jobs, that value is marked uncounted
    -- (prelude.lua's lease_of), and the mark made the name of the counting key below for the jobs
    -- their keys counted: a topic without keyed jobs pays nothing per job for it.
    local lease_at, lease_v = nil, nil
    for i = 1, k do
      local id, at = got[2 * i - 1], got[2 * i]
      if at ~= lease_at then
        lease_at, lease_v = at, lease_of(token_s, at, holder)
        if has_fair then
          lease_v = lease_v .. ':n'
        end
      end
      ids[i] = id
      active[2 * i - 1] = deadline_s
      active[2 * i] = id
      leases[2 * i - 1] = id
      leases[2 * i] = lease_v
    end
    if has_fair and next(counted) ~= nil then
      for i = 1, k do
        local name = counted[ids[i]]
        if name then
          leases[2 * i] = string.sub(leases[2 * i], 1, -2) .. 'c' .. name
        end
      end
    end
    hashed_leases()
    call_many('ZADD', K_ACTIVE, active, 2)
    call_many('HSET', K_LEASES, leases, 2)
    local recs = fetch_many('HMGET', K_JOBS, ids)
    local lost_ids, lost_recs, lost_reasons, lost_leases = {}, {}, {}, {}
    for i = 1, k do
      if recs[i] then
        -- The due time goes back as Redis wrote it (an integer's digits): no parsing here.
        reply[o + 1], reply[o + 2], reply[o + 3] = ids[i], got[2 * i], recs[i]
        o = o + 3
      else
        -- A due id without a record (deleted outside postpone): dead-letter it with the reason, so the
        -- damage is seen and counted, rather than hand out nothing or drop it silently.
        redis.call('ZREM', K_ACTIVE, ids[i])
        redis.call('HDEL', K_LEASES, ids[i])
        redis.call('HDEL', K_STALLS, ids[i])
        lost_ids[#lost_ids + 1] = ids[i]
        lost_leases[#lost_ids] = leases[2 * i]
        lost_recs[#lost_recs + 1] = ''
        lost_reasons[#lost_reasons + 1] = DAMAGED
      end
    end
    if #lost_ids > 0 then
      P().kill_many(lost_ids, lost_recs, lost_reasons, now, nil)
      tally(now, 0, 0, 0, 0, #lost_ids)
      -- Ended here: announced and their followers told as in finish.lua.
      local flags = redis.call('HMGET', K_STATS, 'waits', 'progress', 'follow')
      if flags[1] or flags[2] or flags[3] then
        outcome_helpers()
        local kinds = {}
        for i = 1, #lost_ids do
          kinds[i] = 'd'
        end
        O.after_end(false, flags[1], flags[2], flags[3], channel, topic, lost_ids, kinds, lost_reasons, {}, now)
      end
      if has_fair then
        F.release(lost_ids, lost_leases, now)
      end
      drop_marker_if_last()
    end
    redis.call('SET', K_CLAIM, table.concat(ids, '\n'), 'PX', ARGV[2])
    if next_lease == nil or deadline < next_lease then
      next_lease = deadline
    end
    if not has_fair then
      next_due = earliest(K_DUE)
    end
  end
  if has_fair then
    -- Due jobs of keys held back (their rate, hold or max running) do not make the next claim sooner.
    next_due = F.next_due(fair_ready)
  end
  if tat and k > 0 then
    tat = tat + k * interval
    redis.call('HSET', K_STATS, 'rate_tat', string.format('%.3f', tat))
  end
end
if tat and next_due then
  -- The rate limit: the next job goes when the budget allows it (flow.rs, Budget::next_at).
  local at = math.ceil(tat - (burst - 1) * interval - 1e-6)
  if at > now and at > next_due then
    if next_due <= now then
      held = 2
    end
    next_due = at
  end
elseif go_at and next_due and go_at > next_due then
  next_due = go_at
end
if held == 1 then
  next_due = nil
end

local pending = redis.call('ZRANGE', K_DEAD_PENDING, '-inf', now_s, 'BYSCORE', 'LIMIT', '0', '1')
if ends == nil then
  ends = redis.call('HGET', K_STATS, 'ends')
end
if paused then
  next_due = nil
end
reply[1], reply[2], reply[3], reply[4], reply[5] = now, swept, swept_dead, next_due or false, next_lease or false
reply[6], reply[7], reply[8], reply[9], reply[10] = #pending + (ends and 2 or 0), token, now_us_part, paused and 1 or 0, held
return reply

-- postpone: fairness by key (see docs/design/fairness.md and keys.rs), after the prelude, in every
-- script that files, claims or ends jobs. A job may have a key (a tenant, a customer); within a topic,
-- due jobs of different keys are claimed round-robin between keys. What it costs a topic with no keyed
-- job: one closure per call by EVALSHA, none by FCALL (the helpers are made by `fair_helpers()`, which
-- a script calls only when a job has a key or `fair` is set in stats), one more field read in the
-- HMGETs of stats that the claim and the finish make anyway, and for an enqueue, whether `active` holds
-- FAIR_MARK (prelude_core.lua): one more member in the batch enqueue's ZMSCORE of `active`, a ZSCORE in
-- a single enqueue (a topic with keyed jobs files the jobs without a key under the key '': they take
-- their turn as one key, under no limit per key).
--
-- A job's key is in its record (record.rs: flag 8, the key right after the first byte; record_key
-- below), the only part of a record a script reads, and only on the paths that start from an id (a
-- cancel, a reschedule, an expired lease, a retry or a hold: the worker sends the record back). A keyed
-- job keeps no entry of its own beside its record and its queue entry; its lease names its key when
-- the key counts it as running (fair_counted).
-- Seven keys of the topic and one per key with more than one job, named from `due`'s name (the same
-- hash tag, so the same slot):
--   fone    hash  key's SHA-1 -> id: the queue of a key with one job (most keys of a topic with many
--                 tenants: a job of a key that was not live, in neither `fready` nor `fwait`, with no
--                 job running and no hold, goes here; one HSET for all such keys of an enqueue, one
--                 HMGET and one HDEL for all of a claim). A key's second job moves it to its zset:
--                 a key has one or the other, never both. Entries as the zset's (below).
--   fq:<key's SHA-1, 40 hex>  zset  id -> due time: the key's queue. An entry stands for a job only
--                 while `due` holds that id: a job claimed another way (by its priority) or ended
--                 leaves a stale entry, which the claim drops when it meets it. Every move of a keyed
--                 job in `due` files it again under its key (the same member: its time updated), a
--                 cancel or a replace removes its entry, so the claim reads ids only and takes their
--                 times from `due`. The claim takes from the front only, so what it drops is a prefix
--                 (ZREMRANGEBYRANK), except behind a key that takes from the head of `due`: see `fskip`.
--   fskip   hash  key's SHA-1 -> how many entries at the front of its zset are passed (all of jobs
--                 no longer in `due`): a key taking from the head of `due` (a flood) moves past the
--                 entries of the jobs it took without removing them (a zset entry's removal costs
--                 Redis some 0.2 us, as much as the job's removal from `due`), and its zset goes
--                 with one UNLINK (freed off Redis's main thread) once no entry is left past them.
--                 Only while the key is ready or held: a claim that files it waiting or parks it
--                 removes the passed entries, as does a write to its zset (a new job, a refile), so
--                 ranks never move under the count.
--   fready  zset  key's SHA-1 -> tag: keys with a job due now, served lowest tag first
--   fwait   zset  key's SHA-1 -> when its earliest job is due, or when its rate or hold lets it go
--   frun    hash  key's SHA-1 -> its running jobs (keys with some; every lease of a keyed job counts)
--   ftat    zset  key's SHA-1 -> its rate's TAT (ms; only while in the future)
--   fhold   zset  key's SHA-1 -> until when it is held (a handler's `JobError::rate_limited`)
--   flimit  hash  key's SHA-1 -> the key's own limits, set by operators (key_limits.lua), in place of
--                 the claim's limits per key: "<max running> <interval ms> <burst> <label> <key>"; kept
--                 until cleared, whatever the key's jobs (configuration, not state)
-- Stats: `fair` (set, with FAIR_MARK in `active` beside it, by the first keyed job filed while it is
-- unset; a claim clears both once no key is ready, waiting, running, rate-limited or held: a keyed
-- job still running then comes back unfiled, and is taken as one from before the first key once
-- another keyed job sets them again), `vt` (the tag of the key served last: a key that gets a due job
-- joins at it), `flegacy` (while jobs filed under no key may be due: jobs enqueued before the topic's
-- first keyed job, or back while `fair` was unset; the last due time they may have), `kflow` (the limits per key of the last claim, for operators: written
-- by claim.lua), `flim` (set while `flimit` holds a key: the claim reads it with the stats it reads
-- anyway, so a topic where no key has limits of its own pays no call for them), `fskip` (set while
-- `fskip` holds a key's count, by the claim that makes the first; the claim and the enqueue read it
-- with the fields they read anyway, and look up counts only when it is set).
-- A key with no job has nothing here (its queue, or its entry in `fone`, is gone with its last job)
-- once its TAT has passed.
-- A key at its max running is in neither `fready` nor `fwait`: the end of one of its leases files it
-- again (fair_release).
-- Where version 2 job record `rec` (record.rs: flag 8 of the first byte, then the key's length, one or
-- two bytes for the 1 to 128 of a key, and its bytes) holds its key for fairness: its first byte, the
-- key's first and last positions (nil when it has no key), and where the rest of the record starts;
-- nil for no record, another version, or a cut length. Reads the two or three bytes it needs.
local function key_bounds(rec)
  local b = rec and string.byte(rec, 1)
  if not b or b < 32 or b >= 48 then
    return nil
  elseif b % 16 < 8 then
    return b, nil, nil, 2
  end
  local l, h = string.byte(rec, 2, 3)
  if not l or (l >= 128 and not h) then
    return nil
  elseif l < 128 then
    return b, 3, 2 + l, 3 + l
  end
  local to = 3 + l - 128 + h * 128
  return b, 4, to, to + 1
end

-- The key for fairness in job record `rec`, or nil (no record, or no key): one string made, the key.
local function record_key(rec)
  local _, from, to = key_bounds(rec)
  return from and string.sub(rec, from, to) or nil
end

-- Job record `rec` carrying key `key` (record.rs's put_key): `rec` when it does, or is not a version
-- 2 record; else a copy with the key put in or replaced. For a retry's record, which the worker sends
-- back with the key it was claimed with; a store's own caller may send one without.
local function with_record_key(rec, key)
  local b, from, to, rest = key_bounds(rec)
  if not b or (from and string.sub(rec, from, to) == key) then
    return rec
  elseif not from then
    b = b + 8
  end
  local n = #key
  local len = n < 128 and string.char(n) or string.char(n % 128 + 128, math.floor(n / 128))
  return string.char(b) .. len .. key .. string.sub(rec, rest)
end

-- Whether the topic has keyed jobs (FAIR_MARK in `active`, there while `fair` is set in stats; a batch
-- enqueue reads it with its ZMSCORE of `active`): then jobs without a key are filed under the key ''.
local function fair_on()
  return redis.call('ZSCORE', K_ACTIVE, FAIR_MARK) ~= false
end
-- The helpers, and the names of the keys above, as fields (`F.file`, `F_KEYS.READY`...): made by
-- fair_helpers(), at most once per call. Two small tables, not a local each: every variable a closure
-- captures is an upvalue allocated when the closure is made, and fair_helpers is made at every call of
-- every script (about 300 instructions an upvalue, 11,000 a call with the 35 it had; callgrind).
-- `F_DUE`: the topic they were made for (`due`'s name). A function library (scripts.rs) keeps them
-- from call to call: a call for another topic makes them again, with its keys' names.
local F, F_KEYS, F_DUE = nil, nil, nil
-- Keys' names (each key's SHA-1 in hex) by key, kept from call to call as `F` is (a name is the same
-- in every topic): Redis's SHA-1 of a short key is some 4,700 instructions (callgrind), a lookup here
-- a hundred, and a tenant's key comes back with each of its jobs. At most KEY_NAMES_MAX, then started
-- afresh (the memory a library keeps stays small, whatever the number of keys).
local KEY_NAMES, KEY_NAMES_N, KEY_NAMES_MAX = {}, 0, 512

local function key_name(key)
  local name = KEY_NAMES[key]
  if not name then
    name = redis.sha1hex(key)
    if KEY_NAMES_N >= KEY_NAMES_MAX then
      KEY_NAMES, KEY_NAMES_N = {}, 0
    end
    KEY_NAMES[key], KEY_NAMES_N = name, KEY_NAMES_N + 1
  end
  return name
end

local function fair_helpers()
  if F and F_DUE == K_DUE then
    return
  end
  F_DUE = K_DUE
  -- The name of the key '' (jobs without a key, in a topic with keyed jobs): under no limit per key.
  local UNKEYED = 'da39a3ee5e6b4b0d3255bfef95601890afd80709'
  local base = string.sub(K_DUE, 1, #K_DUE - 3)
  local K_FQ, K_FREADY, K_FWAIT = base .. 'fq:', base .. 'fready', base .. 'fwait'
  -- `stats`, named here too: the single enqueues get only the topic's first four keys.
  local K_FSTATS = base .. 'stats'
  local K_FRUN, K_FTAT, K_FHOLD = base .. 'frun', base .. 'ftat', base .. 'fhold'
  local K_FLIMIT = base .. 'flimit'
  local K_FONE = base .. 'fone'
  local K_FSKIP = base .. 'fskip'

  -- Key `name`'s queue when it has more than one job: a zset of its jobs' ids by due time.
  local function qkey(name)
    return K_FQ .. name
  end

  -- Whether key `name` has a queue: its one job in `fone`, or its zset.
  local function has_queue(name)
    return redis.call('HEXISTS', K_FONE, name) == 1 or redis.call('EXISTS', qkey(name)) == 1
  end

  -- Key `name`'s first `n` queued ids (entries, stale ones too; none read for an `n` of 0), and how
  -- many it has.
  local function queue_head(name, n)
    local one = redis.call('HGET', K_FONE, name)
    if one then
      return { one }, 1
    end
    local skip = tonumber(redis.call('HGET', K_FSKIP, name) or '0')
    local ids = n > 0 and redis.call('ZRANGE', qkey(name), skip, skip + n - 1) or {}
    return ids, redis.call('ZCARD', qkey(name)) - skip
  end

  -- After counts of `fskip` were deleted: clears `fskip` in stats once no key has one (the flag the
  -- claim and the enqueue read with the stats fields they read anyway, set while `fskip` exists).
  local function skips_deleted()
    if redis.call('EXISTS', K_FSKIP) == 0 then
      redis.call('HDEL', K_FSTATS, 'fskip')
      return true
    end
    return false
  end

  -- Removes the entries passed at the front of the zsets of keys `names` (fskip), before a write to
  -- them: a new or moved entry could take a rank among them. For a caller that found `fskip` set in
  -- stats.
  local function unskip(names)
    if #names == 0 then
      return
    end
    local skips = fetch_many('HMGET', K_FSKIP, names)
    local had = {}
    for i, name in ipairs(names) do
      if skips[i] then
        redis.call('ZREMRANGEBYRANK', qkey(name), '0', int_s(tonumber(skips[i]) - 1))
        had[#had + 1] = name
      end
    end
    if #had > 0 then
      call_many('HDEL', K_FSKIP, had, 1)
      skips_deleted()
    end
  end

  -- Whether job `id` is an entry of key `name`'s queue.
  local function queues(name, id)
    local one = redis.call('HGET', K_FONE, name)
    if one then
      return one == id
    end
    return redis.call('ZSCORE', qkey(name), id) ~= false
  end

  -- Files keys after jobs of theirs were filed (`first_at`: name -> the earliest due time among
  -- them), reading each set once for all of them: a key already ready stays as it is; a key waiting
  -- for its rate or hold, or parked at its max running, too (its claim or the end of one of its leases
  -- files it; it waits no later than its job's time); else it is ready at `vt` when the job is due
  -- now, or waits until the earlier of its times. Returns true when it made the first key ready (then
  -- claimers, which may sleep while every key is held back, want a hint: the topic's earliest due time
  -- may be an older job of a held key). `stats`: `vt` and `fair` of stats when the caller read them
  -- (else `vt` is read here, when a key becomes ready). Also returns the keys' names, in the order it
  -- read them, and whether each was live (by index): ready, waiting, or with a job running or a
  -- hold (a key that was not has no queue).
  local function place(first_at, now, stats)
    local names, ats = {}, {}
    for name, at in pairs(first_at) do
      names[#names + 1] = name
      ats[#names] = at
    end
    local live = {}
    if #names == 0 then
      return false, names, live
    end
    local ready = fetch_many('ZMSCORE', K_FREADY, names)
    local waits = fetch_many('ZMSCORE', K_FWAIT, names)
    -- Running counts per key and holds exist only under limits per key: one EXISTS of both says
    -- whether to look (a missing one reads as nothing held, nothing running).
    local runs, holds = {}, {}
    if redis.call('EXISTS', K_FRUN, K_FHOLD) > 0 then
      runs = fetch_many('HMGET', K_FRUN, names)
      holds = fetch_many('ZMSCORE', K_FHOLD, names)
    end
    local to_ready, to_wait, unwait = {}, {}, {}
    local due_now = false
    for i, name in ipairs(names) do
      local at, waits = ats[i], waits[i] and tonumber(waits[i])
      live[i] = (ready[i] or waits or runs[i] or holds[i]) and true or false
      if ready[i] or (waits and waits <= at) then
        -- Stays as it is.
      elseif runs[i] or holds[i] then
        -- It may be parked or held: where it goes is the claim's to say, as soon as it is due.
        to_wait[#to_wait + 1] = string.format('%d', at)
        to_wait[#to_wait + 1] = name
        due_now = due_now or at <= now
      elseif at <= now then
        to_ready[#to_ready + 1] = name
        if waits then
          unwait[#unwait + 1] = name
        end
        due_now = true
      else
        to_wait[#to_wait + 1] = string.format('%d', at)
        to_wait[#to_wait + 1] = name
      end
    end
    -- Claimers may sleep only while no key is ready: a hint is wanted only then (else every enqueue
    -- of a new key's job would wake busy workers to a claim of a few jobs).
    local idle = due_now and redis.call('ZCARD', K_FREADY) == 0
    if #to_ready > 0 then
      local vt
      if stats then
        vt = stats[1] or '0'
      else
        vt = redis.call('HGET', K_FSTATS, 'vt') or '0'
      end
      local add = {}
      for i, name in ipairs(to_ready) do
        add[2 * i - 1] = vt
        add[2 * i] = name
      end
      call_many('ZADD', K_FREADY, add, 2)
    end
    if #unwait > 0 then
      call_many('ZREM', K_FWAIT, unwait, 1)
    end
    if #to_wait > 0 then
      call_many('ZADD', K_FWAIT, to_wait, 2, 'LT')
    end
    return idle, names, live
  end

  -- Files jobs (ids, keys, due times) under their keys, and sets `fair` in stats when it is unset.
  -- Returns true when a key became ready.
  local function file(ids, keys, dues, now)
    local members = {}
    -- Each key is placed once, by its earliest job of the call; its queue gets one ZADD. A due time is
    -- written once for a run of jobs that share it (a batch's jobs mostly do).
    local first_at = {}
    local last_due, score = nil, nil
    for i, id in ipairs(ids) do
      local key, due = keys[i], dues[i]
      local name = key_name(key)
      if due ~= last_due then
        last_due, score = due, string.format('%d', due)
      end
      local queued = members[name]
      if not queued then
        members[name] = { score, id }
        first_at[name] = due
      else
        local m = #queued
        queued[m + 1], queued[m + 2] = score, id
        if due < first_at[name] then
          first_at[name] = due
        end
      end
    end
    -- Filed jobs read `vt` (for a key that becomes ready) and `fair` in one call: `fair` is written by
    -- the topic's first keyed jobs only (or the first again once it was cleared).
    local stats = #ids > 0 and redis.call('HMGET', K_FSTATS, 'vt', 'fair', 'fskip') or nil
    local readied, names, live = place(first_at, now, stats)
    if #ids > 0 then
      if not stats[2] then
        redis.call('ZADD', K_ACTIVE, '+inf', FAIR_MARK)
        if redis.call('HSET', K_FSTATS, 'fair', '1') == 1
          and redis.call('ZCOUNT', K_DUE, '-inf', MAX_MS) > #ids then
          -- The topic's first keyed jobs, beside older ones: those, due by now's last due time, are
          -- filed under no key, and the claim looks for them at the head of `due` until it is past
          -- that time (fair_unkeyed).
          local last = redis.call('ZRANGE', K_DUE, MAX_MS, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
          if #last > 0 then
            redis.call('HSET', K_FSTATS, 'flegacy', last[2])
          end
        end
      end
      -- A key that was not live has no queue: its one job goes in `fone` (one HSET for all such
      -- keys), its jobs in its zset when it gets more. A live key's zset gets them, and its job in
      -- `fone`, if it has one, moves there with them (at its time in `due`; gone from there: stale).
      local ones, moving = {}, {}
      for i, name in ipairs(names) do
        local queued = members[name]
        if live[i] then
          moving[#moving + 1] = name
        elseif #queued == 2 then
          local m = #ones
          ones[m + 1], ones[m + 2] = name, queued[2]
        else
          call_many('ZADD', qkey(name), queued, 2)
        end
      end
      if #ones > 0 then
        call_many('HSET', K_FONE, ones, 2)
      end
      -- (No HMGET of them when no key has its job in `fone`: many keys, each with its zset.)
      if #moving > 0 and (#ones > 0 or redis.call('EXISTS', K_FONE) == 1) then
        local held = fetch_many('HMGET', K_FONE, moving)
        local moved, movers = {}, {}
        for i, name in ipairs(moving) do
          if held[i] then
            local m = #moved + 1
            moved[m], movers[m] = held[i], name
          end
        end
        if #moved > 0 then
          local at = fetch_many('ZMSCORE', K_DUE, moved)
          for j, id in ipairs(moved) do
            if at[j] then
              local queued = members[movers[j]]
              local m = #queued
              queued[m + 1], queued[m + 2] = at[j], id
            end
          end
          call_many('HDEL', K_FONE, movers, 1)
        end
      end
      if stats[3] then
        unskip(moving)
      end
      for _, name in ipairs(moving) do
        call_many('ZADD', qkey(name), members[name], 2)
      end
    end
    return readied
  end

  -- Files new jobs with keys; returns true when a key became ready.
  local function fair_file(ids, keys, dues, now)
    return file(ids, keys, dues, now)
  end

  -- Files new jobs without a key under the key '' when the topic has keyed jobs (`fair` in stats): in
  -- such a topic the jobs without a key take their turn as one key, under no limit per key. Returns
  -- true when that key became ready. `on`: whether the topic has keyed jobs, when the caller read it
  -- after its last filing of keyed jobs (else read here).
  local function fair_file_unkeyed(ids, dues, now, on)
    if #ids == 0 then
      return false
    end
    if on == nil then
      on = fair_on()
    end
    if not on then
      return false
    end
    local keys = {}
    for i = 1, #ids do
      keys[i] = ''
    end
    return file(ids, keys, dues, now)
  end

  -- Files again, under the keys their records hold, jobs back in `due` at new times (a retry, an
  -- expired lease, a reschedule); a job without a key under the key ''. `keys`: their keys (false for
  -- none), in order, when the caller read them; else read here. Returns true when a key became ready.
  local function fair_refile(ids, dues, now, keys)
    if #ids == 0 then
      return false
    end
    if not keys then
      keys = fetch_many('HMGET', K_JOBS, ids)
      for i = 1, #ids do
        keys[i] = record_key(keys[i]) or false
      end
    end
    local k_ids, k_keys, k_dues = {}, {}, {}
    local u_ids, u_dues = {}, {}
    for i, id in ipairs(ids) do
      local key = keys[i]
      if key then
        k_ids[#k_ids + 1], k_keys[#k_keys + 1], k_dues[#k_dues + 1] = id, key, dues[i]
      else
        u_ids[#u_ids + 1], u_dues[#u_dues + 1] = id, dues[i]
      end
    end
    local readied = file(k_ids, k_keys, k_dues, now)
    return fair_file_unkeyed(u_ids, u_dues, now) or readied
  end

  -- Takes the queue entry of due job `id` removed by a cancel or a replace (`rec`: its record, read
  -- before it went; a job without a key may be filed under the key ''), and the key itself when that
  -- was its last entry.
  local function fair_cancel(id, rec)
    local name = key_name(record_key(rec) or '')
    local one, empty = redis.call('HGET', K_FONE, name), false
    if one == id then
      redis.call('HDEL', K_FONE, name)
      empty = true
    elseif not one then
      -- (A due job's entry is never among those passed: its rank is past them, and they stay put.)
      redis.call('ZREM', qkey(name), id)
      local skip = redis.call('HGET', K_FSKIP, name)
      if skip and redis.call('ZCARD', qkey(name)) <= tonumber(skip) then
        redis.call('UNLINK', qkey(name))
        redis.call('HDEL', K_FSKIP, name)
        skips_deleted()
        empty = true
      else
        empty = redis.call('EXISTS', qkey(name)) == 0
      end
    end
    if empty then
      redis.call('ZREM', K_FREADY, name)
      redis.call('ZREM', K_FWAIT, name)
    end
  end

  -- Claims the jobs filed under no key (from before `fair` was last set: see file) among the first
  -- `room` due jobs, in due order, removing them from `due`; appends id, due time pairs to `got`. Returns whether such jobs may still be due (`flegacy`
  -- stays set). `flegacy`: that field of stats, which the caller reads with the others (nil: unset).
  local function fair_unkeyed(room, now, got, flegacy)
    local legacy = tonumber(flegacy or '-1')
    if legacy < 0 then
      return false
    end
    local first = redis.call('ZRANGE', K_DUE, '-inf', now, 'BYSCORE', 'LIMIT', 0, room, 'WITHSCORES')
    if #first == 0 or tonumber(first[2]) > legacy then
      -- Past the last job that may have no key entry (or none due): none is left.
      if #first > 0 or not earliest(K_DUE) or earliest(K_DUE) > legacy then
        redis.call('HDEL', K_FSTATS, 'flegacy')
        return false
      end
      return true
    end
    local ids = {}
    for i = 1, #first, 2 do
      ids[#ids + 1] = first[i]
    end
    -- Filed or not: a job without a key was filed under the key '' if it came after the first keyed
    -- job; a keyed job is in its key's queue unless it came back to `due` while `fair` was unset.
    -- Either way it is taken once: here, or by its key's turn (then this id is gone from `due`).
    local recs = fetch_many('HMGET', K_JOBS, ids)
    local taken = {}
    for i, id in ipairs(ids) do
      local key = record_key(recs[i])
      if not key or not queues(key_name(key), id) then
        taken[#taken + 1] = id
        got[#got + 1] = id
        got[#got + 1] = first[2 * i]
      end
    end
    if #taken > 0 then
      call_many('ZREM', K_DUE, taken, 1)
    end
    return true
  end

  -- Counts claimed jobs (ids) as running under their keys, when the claim counts (a key max running
  -- is set, or some key has limits of its own: every keyed job is counted then, and its end uncounts
  -- it): `frun`. Marks those counted in `counted` (id -> its key's name: their leases say so).
  local function fair_count(ids, counted)
    if #ids == 0 then
      return
    end
    local recs = fetch_many('HMGET', K_JOBS, ids)
    for i = 1, #ids do
      local key = record_key(recs[i])
      if key then
        local name = key_name(key)
        redis.call('HINCRBY', K_FRUN, name, 1)
        counted[ids[i]] = name
      end
    end
  end

  -- Whether lease value `v` says its job is not counted as running under its key (":n" at its end:
  -- prelude.lua's lease_of).
  local function uncounted(v)
    return v ~= false and v ~= nil and string.byte(v, -1) == 110 and string.byte(v, -2) == 58
  end

  -- The name of the key that counts lease value `v`'s job as running (":c<name>" at its end: the
  -- claim's, or key_limits.lua's), or nil.
  local function counted_name(v)
    if v and #v > 42 and string.byte(v, -42) == 58 and string.byte(v, -41) == 99 then
      return string.sub(v, -40)
    end
    return nil
  end

  -- The leases of jobs (ids; `leases`, their lease values in that order, or a function that returns
  -- them) ended: each keyed job counted as running runs one fewer under its key (its lease names the
  -- key: one claimed while its key had no max never took a slot), and a key that was at its max
  -- running (in neither `fready` nor `fwait`, with jobs queued) is ready again. Returns true when it
  -- made a key ready (then claimers want a hint: the claims since it was parked left it out, and may
  -- have found nothing else to wait for).
  local function fair_release(ids, leases, now)
    if #ids == 0 or redis.call('EXISTS', K_FRUN) == 0 then
      return false
    end
    if type(leases) == 'function' then
      leases = leases()
    end
    local vt = nil
    for i = 1, #ids do
      local name = counted_name(leases[i])
      if name then
        if redis.call('HINCRBY', K_FRUN, name, -1) <= 0 then
          redis.call('HDEL', K_FRUN, name)
        end
        if not redis.call('ZSCORE', K_FREADY, name) and not redis.call('ZSCORE', K_FWAIT, name)
          and has_queue(name) then
          vt = vt or redis.call('HGET', K_FSTATS, 'vt') or '0'
          redis.call('ZADD', K_FREADY, vt, name)
        end
      end
    end
    return vt ~= nil
  end

  -- Holds key `key` until `until_ms` (a handler's `JobError::rate_limited` on one of its jobs): none of
  -- its jobs is claimed before, the other keys' are.
  local function fair_hold(key, until_ms)
    local name = key_name(key)
    redis.call('ZADD', K_FHOLD, 'GT', string.format('%d', until_ms), name)
    if redis.call('ZREM', K_FREADY, name) == 1 or redis.call('ZSCORE', K_FWAIT, name) then
      redis.call('ZADD', K_FWAIT, 'GT', string.format('%d', until_ms), name)
    end
  end

  -- When a claim may next find a job of a topic with keys: now when a key is ready, else the earlier
  -- of the first waiting key's time and the earliest due job when it has no key; nil when neither
  -- (every key with a due job is parked at its max running: the end of a lease hints). `ready`: the
  -- caller knows a key is ready (what fair_claim returned).
  local function fair_next_due(ready)
    if ready or redis.call('ZCARD', K_FREADY) > 0 then
      return earliest(K_DUE)
    end
    local at = nil
    local w = redis.call('ZRANGE', K_FWAIT, '0', '0', 'WITHSCORES')
    if #w > 0 then
      at = tonumber(w[2])
    end
    -- The earliest job, when it has no key (unfiled, or under the key '', which no limit holds back).
    local e = redis.call('ZRANGE', K_DUE, '0', '0', 'WITHSCORES')
    if #e > 0 and e[1] ~= HASHED and not record_key(redis.call('HGET', K_JOBS, e[1])) then
      local d = tonumber(e[2])
      if d <= MAX_MS and (at == nil or d < at) then
        at = d
      end
    end
    return at
  end

  -- The claim's turns go to the candidate keys lowest (tag, rank) first: a key's rank is its place in
  -- the round's ZPOPMIN, which gives them by (tag, name), so keys that pop with one tag take their
  -- turns in the order of their names; keys that reach one tag from different tags take theirs in
  -- the order they popped in (a tie either way is fair). Each is a number, its order (`ord`): (tag -
  -- the round's first tag) * ORD_SPAN + rank, so a turn adds ORD_SPAN, and the heap below compares
  -- numbers (a Lua function comparing two keys' fields cost some 10,000 instructions per job claimed
  -- beside 50 other keys; callgrind). ORD_SPAN is more than a round pops (CLAIM_CAP in worker.rs, + 1).
  local ORD_SPAN = 16384

  -- A min-heap of orders.
  local function heap_push(h, x)
    local i = #h + 1
    h[i] = x
    while i > 1 do
      local p = math.floor(i / 2)
      local y = h[p]
      if x >= y then
        break
      end
      h[i], h[p] = y, x
      i = p
    end
  end

  local function heap_pop(h)
    local top, n = h[1], #h
    local x = h[n]
    h[1] = x
    h[n] = nil
    n = n - 1
    local i = 1
    while true do
      local l = 2 * i
      if l > n then
        break
      end
      local m, y = l, h[l]
      if l < n and h[l + 1] < y then
        m, y = l + 1, h[l + 1]
      end
      if x <= y then
        break
      end
      h[i], h[m] = y, x
      i = m
    end
    return top
  end

  -- Whether `fskip` may hold a key's count, as the claim running knows it (`fskip` in stats, set while
  -- it exists; false: every key's count is 0). Set by each claim.
  local skips_known = false

  -- Key `k`'s count of entries passed at the front of its zset (fskip), read once per claim.
  local function skip_of(k)
    if not k.skip then
      k.skip = skips_known and tonumber(redis.call('HGET', K_FSKIP, k.name) or '0') or 0
    end
    return k.skip
  end

  -- Reads the next `count` ids of the queues of keys `ks` (one ZRANGE each, from where the last read
  -- of each ended: `nread` entries read) and looks them up in `due` in one ZMSCORE: appends to each
  -- key's `ids`, and to its `dues` the due time `due` holds for each (as Redis wrote it, false when
  -- none). Every move of a keyed job in `due` files it again under its key (the same member, its score
  -- updated), so `due`'s time is the entry's; `whole` once a read came back short (the key's queue is
  -- all read). A count of 0 reads nothing of that key. A key whose one job is in `fone` (`one`, read
  -- by the claim) reads no zset; a key's zset is read past its entries passed (`skip`: fskip's count,
  -- read by the claim before, or here).
  local function read(ks, counts)
    local all, owner, at = {}, {}, {}
    for j, k in ipairs(ks) do
      if counts[j] > 0 then
        local from = k.nread
        local ids
        if k.one then
          ids, k.whole = from == 0 and { k.one } or {}, true
        else
          local rank = skips_known and skip_of(k) + from or from
          ids = redis.call('ZRANGE', k.q, int_s(rank), int_s(rank + counts[j] - 1))
          if #ids < counts[j] then
            k.whole = true
          end
        end
        for i = 1, #ids do
          k.ids[from + i] = ids[i]
          all[#all + 1] = ids[i]
          owner[#all], at[#all] = k, from + i
        end
        k.nread = from + #ids
      end
    end
    if #all > 0 then
      local dues = fetch_many('ZMSCORE', K_DUE, all)
      for i = 1, #all do
        owner[i].dues[at[i]] = dues[i]
      end
    end
  end

  -- The index of key `k`'s next job that stays in its queue (stale entries before it are passed:
  -- claimed, ended, moved or taken under another key), or nil when it has none; reads `more` entries
  -- more (and the one after) when all those read were passed.
  local function next_entry(k, more, took_ids)
    while true do
      local i = k.pos
      if i > k.nread then
        if k.whole then
          return nil
        end
        read({ k }, { more + 1 })
      else
        if k.dues[i] and not took_ids[k.ids[i]] then
          return i
        end
        k.pos = i + 1
      end
    end
  end

  -- Takes up to `need` jobs of key `k` from the head of `due`, as a topic without keys claims, when `k`
  -- is the last key with jobs due now and nothing holds a key back (no limit per key, no hold, no job
  -- unfiled from before the topic's first keyed job: `by_head` in fair_claim). Then every job `due`
  -- holds due now is one of `k`'s, so the head of `due` is `k`'s first live entries (those not passed
  -- yet), in its queue's order; its queue is not read. `k` moves past as many entries as it took: the
  -- live ones among them are the first of its live entries, so all taken (a stale entry among them,
  -- a job claimed by its priority, is dropped, and leaves the entry of a job taken here behind, stale
  -- in its place, which a later claim passes). `now_s`: now, written once by the caller. Appends id,
  -- due time pairs to `got`, removes the jobs taken from `due` by rank; the write-back drops the entries
  -- passed. Reads one id more than it may take: when that one is due now too, `k` has more jobs due
  -- now (`more`). `first`: the due time of `due`'s head when known (nil: read here). Returns how many
  -- it took. Jobs claimed earlier in the call must be out of `due` before.
  local function take_head(k, need, now_s, got, first)
    local head = redis.call('ZRANGE', K_DUE, '-inf', now_s, 'BYSCORE', 'LIMIT', '0', string.format('%d', need + 1))
    if #head > need then
      -- One more is due now, so `k` has another job due now: the write-back files it as ready without
      -- reading its queue's head.
      head[need + 1] = nil
      k.more = true
    end
    local took = #head
    if took > 0 then
      with_due_times(head, first, got)
      redis.call('ZREMRANGEBYRANK', K_DUE, '0', string.format('%d', took - 1))
      -- The entries passed go with the write-back; the one after is read there (a key whose one job
      -- was in `fone` has none).
      k.pos = k.pos + took
      k.nread, k.whole, k.by_head = k.pos - 1, k.one ~= false, true
    end
    return took
  end

  -- Claims up to `want` keyed jobs round-robin between the keys with a job due now, removing them from
  -- `due`; appends id, due time pairs to `got`. Each turn takes the ready key with the lowest tag and
  -- claims its earliest due job (all it may, when no other key is ready); the key goes back at its
  -- tag + 1 while it has a job due now, waits in `fwait` for its next one (or its rate, or its hold), is
  -- parked at its max running (`kmax`, 0: none), or is gone with its last job. The rate per key is a
  -- GCRA as the topic's (flow.rs): emission interval `interval` ms (0: none), burst `burst`. `legacy`:
  -- whether jobs from before the topic's first key may still be due without a key entry (what
  -- fair_unkeyed returned). `own`: whether some key has limits of its own (`flim` in stats): each
  -- such key's replace `kmax`, `interval` and `burst` for it (`flimit`, read for the keys popped).
  -- `vt`: `vt` of stats (nil when unset), which the caller reads with the other stats fields;
  -- `head_due`: the due time of `due`'s head, when the caller knows it (nil: unknown). The jobs it
  -- counts as running under their keys (a key under a max running) are marked in `counted`. Returns
  -- whether it filed a key as ready (then a key has a job due now).
  --
  -- The turns are played out here, not in Redis: the candidate keys are popped from `fready` at once
  -- (the first `want` + 1; the last only bounds the turns, as the first key not popped), their limits
  -- read in one call per kind, the first entries of their queues read and checked against `due` in one
  -- ZMSCORE (a fair share each, more for a key that gets more turns), and each key's state written back
  -- once: the prefix of its queue claimed or found stale removed, its place in `fready` or `fwait` set
  -- in one ZADD for all. The last key left takes from the head of `due` when nothing holds a key back
  -- (take_head); a key alone from the start reads no entry of its queue but the one after those it
  -- took (the write-back's, where it goes).
  local function fair_claim(want, now, got, kmax, interval, burst, legacy, own, vt, head_due, counted, skipping)
    local now_s = string.format('%d', now)
    local woke = redis.call('ZRANGE', K_FWAIT, '-inf', now_s, 'BYSCORE', 'LIMIT', '0', '1000')
    if #woke > 0 then
      call_many('ZREM', K_FWAIT, woke, 1)
      local add = {}
      for i, name in ipairs(woke) do
        add[2 * i - 1] = vt or '0'
        add[2 * i] = name
      end
      call_many('ZADD', K_FREADY, add, 2, 'NX')
    end
    -- Rates' TATs and holds that have passed say nothing more.
    if interval > 0 or own then
      redis.call('ZREMRANGEBYSCORE', K_FTAT, '-inf', now_s)
    end
    local any_hold = redis.call('EXISTS', K_FHOLD) == 1
    if any_hold then
      redis.call('ZREMRANGEBYSCORE', K_FHOLD, '-inf', now_s)
      any_hold = redis.call('EXISTS', K_FHOLD) == 1
    end
    -- Whether the last key left with jobs due now may take them from the head of `due` (take_head): no
    -- limit per key and no hold (a key held back keeps jobs due now), no unfiled job (`flegacy`), every
    -- key whose time has come woken.
    local by_head = kmax == 0 and interval == 0 and not own and not any_hold and not legacy and #woke < 1000
    local taken, served = 0, nil
    -- Whether it filed a key as ready (the return value: the next due time is now).
    local left_ready = false
    -- Ids claimed here (`nclaimed` of them), and, as a set, `took_ids`: an id met again under another
    -- key is stale there (a key served last and alone adds none: no key comes after it).
    local claimed, nclaimed, took_ids = {}, 0, {}
    -- Whether `fone` holds a key's job (read once, when a round first needs it: a claim files nothing
    -- there).
    local any_one = nil
    skips_known = skipping
    -- Whether `fskip` is set in stats (a claim that passes a key's first entries sets it).
    local flagged = skipping
    -- Each turn claims jobs or files a key elsewhere: bounded.
    local turns = 4 * want + 16
    while taken < want and turns > 0 do
      local popped = redis.call('ZPOPMIN', K_FREADY, string.format('%d', want - taken + 1))
      if #popped == 0 then
        break
      end
      local ks, names, bound = {}, {}, nil
      -- Each key by its order (see ORD_SPAN), for the heap of orders.
      local by_ord = {}
      local tag0 = tonumber(popped[2])
      for i = 1, #popped, 2 do
        -- Every field the claim always sets, in the constructor: the table is made at its size (two
        -- more fields set later would grow it, a rehash per key). `q`: its queue's name, made once (a
        -- string made is hashed whole and interned).
        local tag = tonumber(popped[i + 1])
        local k = { name = popped[i], tag = tag, ids = {}, dues = {}, nread = 0, pos = 1, took = 0,
          cap = math.huge, running = 0, ord = (tag - tag0) * ORD_SPAN + (i + 1) / 2, q = qkey(popped[i]),
          counts = false, one = false }
        by_ord[k.ord] = k
        if i + 1 == #popped and #popped == 2 * (want - taken + 1) then
          bound = k
        else
          ks[#ks + 1] = k
          names[#names + 1] = k.name
        end
      end
      -- Each key's limits: how many it may take (`cap`), and when it may go if not now (`go_at`).
      local runs = (kmax > 0 or own) and fetch_many('HMGET', K_FRUN, names) or {}
      local holds = any_hold and fetch_many('ZMSCORE', K_FHOLD, names) or {}
      local tats = (interval > 0 or own) and fetch_many('ZMSCORE', K_FTAT, names) or {}
      -- (No table made when no key has limits of its own.)
      local lims = own and fetch_many('HMGET', K_FLIMIT, names)
      local open = 0
      for i, k in ipairs(ks) do
        if k.name ~= UNKEYED then
          -- The key's own limits, if any, in place of the claim's (kept on the key for the write-back).
          local kmax, interval, burst = kmax, interval, burst
          if lims and lims[i] then
            local m, iv, b = string.match(lims[i], '^(%d+) ([%d.]+) (%d+) ')
            kmax, interval, burst = tonumber(m), tonumber(iv), tonumber(b)
            k.lim = { kmax, interval, burst }
          end
          if kmax > 0 then
            k.counts = true
            k.running = tonumber(runs[i] or '0')
            -- At its max: parked until one of its leases ends (fair_release).
            k.cap = math.min(k.cap, kmax - k.running)
          end
          if k.cap > 0 and holds[i] then
            k.go_at, k.cap = tonumber(holds[i]), 0
          end
          if k.cap > 0 and interval > 0 then
            k.tat = math.max(tonumber(tats[i] or '0'), now)
            local allowed = math.floor((now - k.tat) / interval + burst + 1e-9)
            if allowed < 1 then
              k.go_at, k.cap, k.tat = math.ceil(k.tat - (burst - 1) * interval - 1e-6), 0, nil
            elseif allowed < k.cap then
              k.cap = allowed
            end
          end
        end
        if k.cap > 0 then
          open = open + 1
        else
          -- Its turn goes by without a job.
          turns = turns - 1
        end
      end
      -- A fair share of the slots each, and the entry after (it says whether the key stays ready); a
      -- key held back reads its first entry only (it says where the key waits).
      local share = math.ceil((want - taken) / math.max(open, 1))
      -- A key alone takes from the head of `due` (below), without reading its queue. When every ready
      -- key is a candidate, the one served last (the highest tag: a key served before that still has
      -- jobs, a flood beside keys just come) reads nothing now: once the others are done it is alone
      -- and takes from the head of `due`; if it gets turns before that, it reads as it goes
      -- (next_entry).
      -- Whether the keys' jobs in `fone` were read (`one`: a key's one job there; a key alone, taking
      -- from the head of `due`, does not read it: its write-back deletes its entry there, if any, once
      -- the key has no job left).
      local ones_known = not (by_head and #ks == 1 and not bound)
      if ones_known then
        if any_one == nil then
          any_one = redis.call('EXISTS', K_FONE) == 1
        end
        if any_one then
          local ones = fetch_many('HMGET', K_FONE, names)
          for i, k in ipairs(ks) do
            if ones[i] then
              k.one = ones[i]
            end
          end
        end
        local last = nil
        if by_head and not bound then
          for _, k in ipairs(ks) do
            if k.cap > 0 and (last == nil or last.ord < k.ord) then
              last = k
            end
          end
        end
        local counts = {}
        for i, k in ipairs(ks) do
          if k == last then
            counts[i] = 0
          else
            counts[i] = (k.cap > 0) and math.min(k.cap, share) + 1 or 1
          end
        end
        -- The counts of entries passed of the zsets read (fskip), when some key may have one: one
        -- HMGET per round for all.
        if skips_known then
          local zs, znames = {}, {}
          for i, k in ipairs(ks) do
            if not k.one and counts[i] > 0 then
              zs[#zs + 1], znames[#zs + 1] = k, k.name
            end
          end
          local skips = #zs > 0 and fetch_many('HMGET', K_FSKIP, znames) or {}
          for i, k in ipairs(zs) do
            k.skip = skips[i] and tonumber(skips[i]) or 0
          end
        end
        read(ks, counts)
      end
      local heap = {}
      for _, k in ipairs(ks) do
        if k.cap > 0 then
          heap_push(heap, k.ord)
        end
      end
      while taken < want and #heap > 0 and turns > 0 do
        if bound and bound.ord < heap[1] then
          -- The first key not popped comes before: the next round pops it.
          break
        end
        turns = turns - 1
        local k = by_ord[heap_pop(heap)]
        -- The last key left takes all it may.
        local alone = #heap == 0 and not bound
        local cap = math.min(alone and want - taken or 1, k.cap)
        local took = 0
        if alone and by_head then
          -- The jobs claimed so far leave `due` first: its head is then this key's jobs due now.
          if nclaimed > 0 then
            call_many('ZREM', K_DUE, claimed, 1)
            claimed, nclaimed, head_due = {}, 0, nil
          end
          took = take_head(k, cap, now_s, got, head_due)
        end
        -- The usual claim takes the rest (from a stale entry of the queue on, if any).
        local ngot = #got
        while took < cap do
          local i = next_entry(k, cap - took, took_ids)
          local due = i and k.dues[i]
          if not i or tonumber(due) > now then
            break
          end
          local id = k.ids[i]
          got[ngot + 1], got[ngot + 2], ngot = id, due, ngot + 2
          if k.counts then
            counted[id] = k.name
          end
          nclaimed = nclaimed + 1
          claimed[nclaimed] = id
          if not alone then
            took_ids[id] = true
          end
          k.pos = i + 1
          took = took + 1
        end
        if took > 0 then
          taken = taken + took
          served = k.tag
          k.took, k.cap, k.tag, k.ord = k.took + took, k.cap - took, k.tag + 1, k.ord + ORD_SPAN
          by_ord[k.ord] = k
        end
        -- Whether it stays in the heap (once the claim is full, the write-back reads where it goes).
        local i = taken < want and k.cap > 0 and next_entry(k, 1, took_ids)
        if i and tonumber(k.dues[i]) <= now then
          heap_push(heap, k.ord)
        end
      end

      -- Each key's state, written back: its queue's prefix claimed or stale, its running jobs and TAT,
      -- and where it goes (ready at its tag, waiting, parked, or gone with its last job).
      local ready, waiting, emptied, unone, unskipped = {}, {}, {}, {}, {}
      for _, k in ipairs(ks) do
        -- Where it goes depends on its first job left (stale entries before it go too).
        local head = nil
        while k.pos <= k.nread and not (k.dues[k.pos] and not took_ids[k.ids[k.pos]]) do
          k.pos = k.pos + 1
        end
        local drop = k.pos - 1
        -- Whether its zset's front is still to be written: its entries passed before, and `drop` more.
        local zset = false
        if k.one then
          if drop > 0 then
            unone[#unone + 1] = k.name
          end
        elseif drop > 0 and k.whole and drop == k.nread then
          -- All of its queue goes: deleted with the others' below (it was read: its count is known).
          emptied[#emptied + 1] = k.q
          if (k.skip or 0) > 0 then
            unskipped[#unskipped + 1] = k.name
          end
        elseif not skips_known and not k.by_head then
          -- No key has entries passed, and this one passes none: the claimed or stale ones go now.
          if drop > 0 then
            redis.call('ZREMRANGEBYRANK', k.q, '0', int_s(drop - 1))
          end
        else
          zset = true
        end
        if k.pos <= k.nread then
          head = tonumber(k.dues[k.pos])
        elseif k.more then
          -- It took from the head of `due`, and more of its jobs are due now (take_head).
          head = now
        elseif not k.whole then
          -- Every entry read was claimed or stale, and there are more: the next one decides (past
          -- those passed, when they stay).
          local at = int_s(zset and skip_of(k) + drop or 0)
          local nxt = redis.call('ZRANGE', k.q, at, at, 'WITHSCORES')
          if #nxt > 0 then
            head = tonumber(nxt[2])
          end
        end
        if zset then
          if head ~= nil and by_head and head <= now and (k.by_head or (k.skip or 0) > 0) then
            -- It goes back to `fready` and took from the head of `due`, or has passed entries
            -- already: those passed now join them (fskip), removed with the zset at its end.
            if drop > 0 then
              redis.call('HINCRBY', K_FSKIP, k.name, drop)
              skips_known = true
            end
          else
            local after = skip_of(k) + drop
            if after > 0 and head == nil then
              -- No entry past those passed: the zset goes whole (UNLINK: a flood's is freed off
              -- Redis's main thread).
              emptied[#emptied + 1] = k.q
            elseif after > 0 then
              -- It waits, is parked or is held back: its passed entries go now.
              redis.call('ZREMRANGEBYRANK', k.q, '0', int_s(after - 1))
            end
            if k.skip > 0 then
              unskipped[#unskipped + 1] = k.name
            end
          end
        end
        if head == nil and not ones_known then
          -- Its one job may have been in `fone`: no entry stays for a key without jobs.
          unone[#unone + 1] = k.name
        end
        local go_at = k.go_at
        local kmax, interval, burst = kmax, interval, burst
        if k.lim then
          kmax, interval, burst = k.lim[1], k.lim[2], k.lim[3]
        end
        if k.took > 0 then
          if kmax > 0 and k.name ~= UNKEYED then
            redis.call('HINCRBY', K_FRUN, k.name, k.took)
          end
          if k.tat then
            k.tat = k.tat + k.took * interval
            redis.call('ZADD', K_FTAT, string.format('%.3f', k.tat), k.name)
            if math.floor((now - k.tat) / interval + burst + 1e-9) < 1 then
              go_at = math.ceil(k.tat - (burst - 1) * interval - 1e-6)
            end
          end
        end
        if head ~= nil then
          if k.name ~= UNKEYED and kmax > 0 and k.running + k.took >= kmax then
            -- Parked at its max running: the end of one of its leases files it again.
            redis.call('HSET', K_FSTATS, 'full', '1')
          elseif go_at and go_at > now then
            waiting[#waiting + 1] = string.format('%d', math.max(go_at, head))
            waiting[#waiting + 1] = k.name
          elseif head <= now then
            ready[#ready + 1] = string.format('%d', k.tag)
            ready[#ready + 1] = k.name
          else
            waiting[#waiting + 1] = string.format('%d', head)
            waiting[#waiting + 1] = k.name
          end
        end
      end
      for i = 1, #emptied, 500 do
        redis.call('UNLINK', unpack(emptied, i, math.min(i + 499, #emptied)))
      end
      if #unone > 0 then
        call_many('HDEL', K_FONE, unone, 1)
      end
      if #unskipped > 0 then
        call_many('HDEL', K_FSKIP, unskipped, 1)
        if skips_deleted() then
          skips_known, flagged = false, false
        end
      end
      if bound then
        ready[#ready + 1] = string.format('%d', bound.tag)
        ready[#ready + 1] = bound.name
      end
      if #ready > 0 then
        call_many('ZADD', K_FREADY, ready, 2)
        left_ready = true
      end
      if #waiting > 0 then
        call_many('ZADD', K_FWAIT, waiting, 2)
      end
      if not bound then
        -- Every ready key was a candidate: none is left to pop.
        break
      end
    end
    if nclaimed > 0 then
      call_many('ZREM', K_DUE, claimed, 1)
    end
    if served then
      redis.call('HSET', K_FSTATS, 'vt', string.format('%d', served))
    end
    if skips_known and not flagged then
      redis.call('HSET', K_FSTATS, 'fskip', '1')
    end
    return left_ready
  end
  -- One constructor: the table is made at its size (fields set one by one would grow it four times),
  -- small enough for the allocator's fast path (with the keys' names too, its 32 slots took a slow
  -- path of glibc's malloc, which Redis's Lua allocates with: 20,000 instructions a call).
  F = {
    file = fair_file, file_unkeyed = fair_file_unkeyed, refile = fair_refile, cancel = fair_cancel,
    unkeyed = fair_unkeyed, claim = fair_claim, count = fair_count, release = fair_release,
    hold = fair_hold, next_due = fair_next_due, uncounted = uncounted, counted_name = counted_name,
    has_queue = has_queue, queue_head = queue_head,
  }
  F_KEYS = { Q = K_FQ, READY = K_FREADY, WAIT = K_FWAIT, RUN = K_FRUN, TAT = K_FTAT, HOLD = K_FHOLD,
    LIMIT = K_FLIMIT, ONE = K_FONE }
end

-- Files one job just put in `due` at `at` under its key (`key`; '' for none: then under the key '' when
-- the topic has keyed jobs, else nowhere). Returns true when a key became ready (the claimers want a
-- hint). For the scripts that create one job at a time.
local function fair_file_one(id, key, at, now)
  if key ~= '' then
    fair_helpers()
    return F.file({ id }, { key }, { at }, now)
  elseif fair_on() then
    fair_helpers()
    return F.file_unkeyed({ id }, { at }, now, true)
  end
  return false
end

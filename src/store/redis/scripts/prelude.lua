-- postpone: the rest of the shared prelude (leases, deaths, listings, priorities), prepended after
-- prelude_core.lua to every script but enqueue_one.lua (see scripts.rs).

-- Before leases are added: puts the marker in `active` and `leases`.
local function hashed_leases()
  redis.call('ZADD', K_ACTIVE, 'NX', '+inf', HASHED)
  redis.call('HSETNX', K_LEASES, HASHED, '')
end

-- After leases are removed: when only the marker is left, deletes `active` and `leases`; when the
-- marker of keyed jobs (FAIR_MARK) is left beside it, that one stays.
local function drop_marker_if_last()
  local n = redis.call('ZCARD', K_ACTIVE)
  if n == 1 and redis.call('ZSCORE', K_ACTIVE, HASHED) then
    redis.call('DEL', K_ACTIVE, K_LEASES)
  elseif n == 2 and redis.call('ZCOUNT', K_ACTIVE, '+inf', '+inf') == 2 then
    redis.call('ZREM', K_ACTIVE, HASHED)
    redis.call('DEL', K_LEASES)
  end
end

-- A lease: "<token>:<due time>:<holder>", the token of the claim that holds it, the job's due time when
-- it was claimed (a job whose lease expires is due again at that time: it keeps its place in line),
-- and the number of the worker that claimed it (for operators); in a topic with keyed jobs, after them
-- ":c<name>" when the job's key counts it as running (`name`: the key's SHA-1 in hex; fair.lua's
-- F.counted_name reads it, and fair_release frees that key's slot when it ends), else ":n" (claimed
-- while its key had no max running, or without a key: F.uncounted).
local function lease_of(token, due, holder)
  return token .. ':' .. due .. ':' .. holder
end

-- Whether lease value `v` is held under `token` (a string): `v` starts with the token and a colon. Found
-- in place (a plain find at the start, then the colon's byte), making no string: a cut of `v` and the
-- token with its colon would each be a new string, hashed and interned, for every job a finish ends.
local function held_by(v, token)
  return v ~= false and v ~= nil and string.byte(v, #token + 1) == 58 and string.find(v, token, 1, true) == 1
end

-- The due time in lease value `v`, or nil (also from a lease of two fields, written before holders).
local function lease_due(v)
  if not v then
    return nil
  end
  local at = string.find(v, ':', 1, true)
  if not at then
    return nil
  end
  local to = string.find(v, ':', at + 1, true)
  return tonumber(string.sub(v, at + 1, to and to - 1 or -1))
end

-- The holder in lease value `v` (a string of digits), or '0'.
local function lease_holder(v)
  if not v then
    return '0'
  end
  local h = string.match(v, '^[^:]*:[^:]*:(%d+)')
  return h or '0'
end

-- Death -> the key for fairness its job had (a job with one keeps it when requeued; see fair.lua): a
-- hash of the topic's slot, named from `due`'s name, with an entry while its death's record stays.
-- `dkeys` in stats is set once a keyed job died in the topic: a topic without one never touches it.
local K_DEAD_KEYS = string.sub(K_DUE, 1, #K_DUE - 3) .. 'dead_keys'

-- The first line of a waiting job's entry in `waiting` (deps.lua) when the job has a key for fairness:
-- nonce, policy, parents left, due kind, due value, priority, key.
local WAITING_KEYED = '^(%S+) (%S+) (%d+) (%a+) (%-?%d+) (%d+) (.+)$'

-- P(): the helpers for deaths, listings and priorities (`P().kill_many`, `P().file_prio`...), made at a
-- script's first use of one. Every function a script's source defines is a closure made at every call,
-- with an upvalue allocated for each variable it captures: these twelve cost every call of every script
-- with this prelude some 12,000 instructions (callgrind), for paths most calls never take. Sent by
-- EVALSHA, P_ is nil at each call; in a function library (FCALL) it is kept from call to call: its
-- helpers capture only the library's locals, which each call assigns (see scripts.rs).
local P_ = nil
local function P()
  if P_ then
    return P_
  end
  -- A death: "<id>\n<sequence, 15 digits>". Every death of a job is a dead letter of its own; the members
  -- of one id sort together, oldest death first, in `dead_ids` (all scores 0, ranged by lex).
  local function death_of(id, seq)
    return id .. '\n' .. string.format('%015d', seq)
  end

  -- Deletes the keys kept with deaths whose record goes (when any keyed job ever died here).
  local function bury_keys(deaths)
    if #deaths > 0 and redis.call('HGET', K_STATS, 'dkeys') then
      call_many('HDEL', K_DEAD_KEYS, deaths, 1)
    end
  end

  -- Adds jobs (already removed from due/active/jobs) to the dead letters, each a new death, listed and
  -- pending its hook from now. `dead_info` holds "<died at> <reason>". The death's sequence number is the
  -- topic's `dead` counter. `keys` (optional): each job's key for fairness, or false; kept with its death
  -- (`dead_keys`), so that the job is requeued under it.
  local function kill_many(ids, recs, reasons, now, keys)
    if #ids == 0 then
      return
    end
    local last = redis.call('HINCRBY', K_STATS, 'dead', #ids)
    local now_s = string.format('%d', now)
    local jobs, info, died, byid = {}, {}, {}, {}
    for i, id in ipairs(ids) do
      local d = death_of(id, last - #ids + i)
      jobs[2 * i - 1] = d
      jobs[2 * i] = recs[i]
      info[2 * i - 1] = d
      info[2 * i] = now_s .. ' ' .. reasons[i]
      died[2 * i - 1] = now_s
      died[2 * i] = d
      byid[2 * i - 1] = '0'
      byid[2 * i] = d
    end
    call_many('HSET', K_DEAD_JOBS, jobs, 2)
    call_many('HSET', K_DEAD_INFO, info, 2)
    call_many('ZADD', K_DEAD, died, 2)
    call_many('ZADD', K_DEAD_PENDING, died, 2)
    call_many('ZADD', K_DEAD_IDS, byid, 2)
    if keys then
      local kept = {}
      for i = 1, #ids do
        if keys[i] and keys[i] ~= '' then
          kept[#kept + 1] = jobs[2 * i - 1]
          kept[#kept + 1] = keys[i]
        end
      end
      if #kept > 0 then
        call_many('HSET', K_DEAD_KEYS, kept, 2)
        redis.call('HSET', K_STATS, 'dkeys', '1')
      end
    end
  end

  -- Deletes the record and reason of each death that is not in `still` (the listing, or the hook's queue):
  -- a death's record stays while it is listed or its hook pending.
  local function bury_unless_in(still, deaths)
    local kept = fetch_many('ZMSCORE', still, deaths)
    local gone = {}
    for i, d in ipairs(deaths) do
      if not kept[i] then
        gone[#gone + 1] = d
      end
    end
    if #gone > 0 then
      call_many('HDEL', K_DEAD_JOBS, gone, 1)
      call_many('HDEL', K_DEAD_INFO, gone, 1)
      bury_keys(gone)
    end
  end

  -- Takes deaths off the dead letters' listing. Their record and reason stay while their hook is pending
  -- (the hook sees every death, requeued or purged or not), and go with the acknowledgement.
  local function unlist_many(deaths)
    if #deaths == 0 then
      return
    end
    call_many('ZREM', K_DEAD, deaths, 1)
    call_many('ZREM', K_DEAD_IDS, deaths, 1)
    bury_unless_in(K_DEAD_PENDING, deaths)
  end

  -- Deaths as replies: three fields each, death, record, info ("<died at> <reason>").
  local function death_entries(deaths)
    local recs = fetch_many('HMGET', K_DEAD_JOBS, deaths)
    local info = fetch_many('HMGET', K_DEAD_INFO, deaths)
    local out = {}
    for i, d in ipairs(deaths) do
      out[#out + 1] = d
      out[#out + 1] = recs[i] or ''
      out[#out + 1] = info[i] or ''
    end
    return out
  end


  -- Live jobs as listing entries (page.lua, find_prefix.lua): seven fields each, id, score, record,
  -- stalls, holder, '', key for fairness (`keys[i]`: see listed_keys in fair.lua; see page.lua).
  -- `active` says whether they are leased (then the holder is read).
  local function live_entries(out, ids, scores, active, keys)
    local recs = fetch_many('HMGET', K_JOBS, ids)
    local stalls = fetch_many('HMGET', K_STALLS, ids)
    local leases = {}
    if active then
      leases = fetch_many('HMGET', K_LEASES, ids)
    end
    for i, id in ipairs(ids) do
      local b = #out
      out[b + 1], out[b + 2], out[b + 3] = id, scores[i], recs[i] or ''
      out[b + 4], out[b + 5], out[b + 6] = tonumber(stalls[i] or 0), lease_holder(leases[i]), ''
      out[b + 7] = keys[i] or ''
    end
    return out
  end

  -- Listed deaths as listing entries: death, time of death, record, 0, '0', info, key for fairness.
  local function dead_entries(out, deaths, died)
    local recs = fetch_many('HMGET', K_DEAD_JOBS, deaths)
    local info = fetch_many('HMGET', K_DEAD_INFO, deaths)
    local keys = redis.call('EXISTS', K_DEAD_KEYS) == 1 and fetch_many('HMGET', K_DEAD_KEYS, deaths) or {}
    for i, d in ipairs(deaths) do
      local b = #out
      out[b + 1], out[b + 2], out[b + 3] = d, died[i] or '0', recs[i] or ''
      out[b + 4], out[b + 5], out[b + 6] = 0, '0', info[i] or ''
      out[b + 7] = keys[i] or ''
    end
    return out
  end

  -- A due job's score in `prio_ready` (keys.rs): priority first (1 to 31, highest first), then due time.
  -- Exact in a double: due times are below 2^48.
  local PRIO_UNIT = 281474976710656
  local function prio_score(priority, due)
    return string.format('%d', due - priority * PRIO_UNIT)
  end

  -- The due time in a `prio_ready` score.
  local function prio_due(score)
    local s = tonumber(score)
    return s + math.ceil(-s / PRIO_UNIT) * PRIO_UNIT
  end

  -- Files jobs with a priority (ids, due times, priorities) in `prio_ready` or `prio_wait` by `now`.
  local function file_prio(ids, dues, prios, now)
    local ready, wait = {}, {}
    for i, id in ipairs(ids) do
      local p = tonumber(prios[i])
      if p and p > 0 then
        if dues[i] <= now then
          ready[#ready + 1] = prio_score(p, dues[i])
          ready[#ready + 1] = id
        else
          wait[#wait + 1] = string.format('%d', dues[i])
          wait[#wait + 1] = id
        end
      end
    end
    if #ready > 0 then
      call_many('ZADD', K_PRIO_READY, ready, 2)
    end
    if #wait > 0 then
      call_many('ZADD', K_PRIO_WAIT, wait, 2)
    end
  end

  -- Forgets the priorities of jobs that end (done, dead, cancelled), when any job has one.
  local function forget_prio(ids)
    if #ids > 0 and redis.call('EXISTS', K_PRIO) == 1 then
      call_many('HDEL', K_PRIO, ids, 1)
    end
  end

  P_ = {
    bury_keys = bury_keys, kill_many = kill_many, bury_unless_in = bury_unless_in, unlist_many = unlist_many,
    death_entries = death_entries, live_entries = live_entries, dead_entries = dead_entries,
    prio_due = prio_due, file_prio = file_prio, forget_prio = forget_prio,
  }
  return P_
end

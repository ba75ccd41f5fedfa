-- postpone: fairness by key (see docs/design/fairness.md and keys.rs), after the prelude, in every
-- script that files, claims or ends jobs. A job may have a key (a tenant, a customer); within a topic,
-- due jobs of different keys are claimed round-robin between keys. What it costs a topic with no keyed
-- job: one closure per call (the helpers are made by `fair_helpers()`, which a script calls only when
-- a job has a key or `fair` is set in stats), and one more field read in the HMGETs of stats that the
-- claim and the finish make anyway.
--
-- Four keys of the topic, named from `due`'s name (the same hash tag, so the same slot):
--   fkey    hash  id -> its key, for every live keyed job (a retry, an expired lease or a reschedule
--                 files the job again under it; an end deletes it)
--   fq      zset  all scores 0, members "<key's SHA-1, 40 hex>:<due ms, 15 digits>:<id>": each key's
--                 queue, in due order (then id), ranged by lex. An entry stands for a job only while
--                 `due` holds that id at that time: a job claimed, cancelled, ended or moved leaves a
--                 stale entry, which the claim drops when it meets it (every move files a new one).
--   fready  zset  key's SHA-1 -> tag: keys with a job due now, served lowest tag first
--   fwait   zset  key's SHA-1 -> when its earliest job is due
-- Stats: `fair` (set while `fkey` may hold an id; the claim clears it, and deletes the other three,
-- once `fkey` is empty), `vt` (the tag of the key served last: a key that gets a due job joins at it).
-- A key with no job has nothing here once the claim has met its last entry.
local K_FKEY, K_FQ, K_FREADY, K_FWAIT
-- The helpers, defined by fair_helpers().
local fair_file, fair_refile, fair_forget, fair_cancel, fair_unkeyed, fair_claim

local function fair_helpers()
  if K_FKEY then
    return
  end
  local base = string.sub(K_DUE, 1, #K_DUE - 3)
  K_FKEY, K_FQ, K_FREADY, K_FWAIT = base .. 'fkey', base .. 'fq', base .. 'fready', base .. 'fwait'

  local function entry(name, at, id)
    return name .. ':' .. string.format('%015d', at) .. ':' .. id
  end

  -- Files key `name` after one of its jobs was filed due at `at`: a key already ready stays as it is;
  -- else it is ready at `vt` when the job is due now, or waits until the earlier of its times.
  local function place(name, at, now, vt)
    if redis.call('ZSCORE', K_FREADY, name) then
      return
    end
    if at <= now then
      redis.call('ZREM', K_FWAIT, name)
      redis.call('ZADD', K_FREADY, vt, name)
    else
      redis.call('ZADD', K_FWAIT, 'LT', string.format('%d', at), name)
    end
  end

  -- Files jobs (ids, keys, due times) under their keys; sets `fkey` when `set_keys`.
  local function file(ids, keys, dues, now, set_keys)
    local vt = redis.call('HGET', K_STATS, 'vt') or '0'
    local fields, members = {}, {}
    for i, id in ipairs(ids) do
      local name = redis.sha1hex(keys[i])
      fields[#fields + 1] = id
      fields[#fields + 1] = keys[i]
      members[#members + 1] = '0'
      members[#members + 1] = entry(name, dues[i], id)
      place(name, dues[i], now, vt)
    end
    if #ids > 0 then
      if set_keys then
        call_many('HSET', K_FKEY, fields, 2)
        redis.call('HSET', K_STATS, 'fair', '1')
      end
      call_many('ZADD', K_FQ, members, 2)
    end
  end

  -- Files new jobs with keys.
  fair_file = function(ids, keys, dues, now)
    file(ids, keys, dues, now, true)
  end

  -- Files again, under the keys they have, jobs back in `due` at new times (a retry, an expired lease,
  -- a reschedule); jobs without a key are left alone.
  fair_refile = function(ids, dues, now)
    if #ids == 0 then
      return
    end
    local keys = fetch_many('HMGET', K_FKEY, ids)
    local k_ids, k_keys, k_dues = {}, {}, {}
    for i, id in ipairs(ids) do
      if keys[i] then
        k_ids[#k_ids + 1], k_keys[#k_keys + 1], k_dues[#k_dues + 1] = id, keys[i], dues[i]
      end
    end
    file(k_ids, k_keys, k_dues, now, false)
  end

  -- Forgets the keys of jobs that ended (their queue entries, if any, are stale).
  fair_forget = function(ids)
    if #ids > 0 then
      call_many('HDEL', K_FKEY, ids, 1)
    end
  end

  -- Forgets the key of due job `id` (due at `at`) removed by a cancel, with its queue entry, and the
  -- key itself when that was its last entry.
  fair_cancel = function(id, at)
    local key = redis.call('HGET', K_FKEY, id)
    if not key then
      return
    end
    redis.call('HDEL', K_FKEY, id)
    local name = redis.sha1hex(key)
    redis.call('ZREM', K_FQ, entry(name, at, id))
    if #redis.call('ZRANGE', K_FQ, '[' .. name .. ':', '[' .. name .. ';', 'BYLEX', 'LIMIT', 0, 1) == 0 then
      redis.call('ZREM', K_FREADY, name)
      redis.call('ZREM', K_FWAIT, name)
    end
  end

  -- Claims the jobs without a key among the first `room` due jobs, in due order, removing them from
  -- `due`; appends id, due time pairs to `got`.
  fair_unkeyed = function(room, now, got)
    local first = redis.call('ZRANGE', K_DUE, '-inf', now, 'BYSCORE', 'LIMIT', 0, room, 'WITHSCORES')
    if #first == 0 then
      return
    end
    local ids = {}
    for i = 1, #first, 2 do
      ids[#ids + 1] = first[i]
    end
    local keys = fetch_many('HMGET', K_FKEY, ids)
    local taken = {}
    for i, id in ipairs(ids) do
      if not keys[i] then
        taken[#taken + 1] = id
        got[#got + 1] = id
        got[#got + 1] = first[2 * i]
      end
    end
    if #taken > 0 then
      call_many('ZREM', K_DUE, taken, 1)
    end
  end

  -- Claims up to `want` keyed jobs round-robin between the keys with a job due now, removing them from
  -- `due`; appends id, due time pairs to `got`. Each turn takes the ready key with the lowest tag and
  -- claims its earliest due job (all it may, when no other key is ready); the key goes back at its
  -- tag + 1 while it has a job due now, waits in `fwait` for its next one, or is gone with its last.
  fair_claim = function(want, now, got)
    local vt = redis.call('HGET', K_STATS, 'vt')
    local woke = redis.call('ZRANGE', K_FWAIT, '-inf', now, 'BYSCORE', 'LIMIT', 0, 1000)
    if #woke > 0 then
      call_many('ZREM', K_FWAIT, woke, 1)
      local add = {}
      for i, name in ipairs(woke) do
        add[2 * i - 1] = vt or '0'
        add[2 * i] = name
      end
      call_many('ZADD', K_FREADY, add, 2, 'NX')
    end
    local taken, served = 0, nil
    local claimed = {}
    -- Each turn claims a job, or drops stale entries, or files a key elsewhere: bounded.
    local turns = 4 * want + 16
    while taken < want and turns > 0 do
      turns = turns - 1
      local top = redis.call('ZPOPMIN', K_FREADY)
      if #top == 0 then
        break
      end
      local name, tag = top[1], tonumber(top[2])
      local n = 1
      if redis.call('ZCARD', K_FREADY) == 0 then
        n = want - taken
      end
      local limit = n + 8
      local entries = redis.call('ZRANGE', K_FQ, '[' .. name .. ':', '[' .. name .. ';', 'BYLEX', 'LIMIT', 0, limit)
      local ids = {}
      for i, e in ipairs(entries) do
        ids[i] = string.sub(e, 58)
      end
      local dues = {}
      if #ids > 0 then
        dues = fetch_many('ZMSCORE', K_DUE, ids)
      end
      local drop = {}
      local took, head = 0, nil
      for i, e in ipairs(entries) do
        local at = tonumber(string.sub(e, 42, 56))
        if not dues[i] or tonumber(dues[i]) ~= at then
          drop[#drop + 1] = e
        elseif at <= now and took < n then
          drop[#drop + 1] = e
          got[#got + 1] = ids[i]
          got[#got + 1] = string.format('%d', at)
          claimed[#claimed + 1] = ids[i]
          took = took + 1
        else
          head = at
          break
        end
      end
      if #drop > 0 then
        call_many('ZREM', K_FQ, drop, 1)
      end
      if head == nil and #entries == limit then
        -- Every entry looked at was taken or stale, and there are more: the next one decides.
        local nxt = redis.call('ZRANGE', K_FQ, '[' .. name .. ':', '[' .. name .. ';', 'BYLEX', 'LIMIT', 0, 1)
        if #nxt > 0 then
          head = tonumber(string.sub(nxt[1], 42, 56))
        end
      end
      if took > 0 then
        taken = taken + took
        served = tag
      end
      if head ~= nil then
        if head <= now then
          redis.call('ZADD', K_FREADY, string.format('%d', took > 0 and tag + 1 or tag), name)
        else
          redis.call('ZADD', K_FWAIT, string.format('%d', head), name)
        end
      end
    end
    if #claimed > 0 then
      call_many('ZREM', K_DUE, claimed, 1)
    end
    if served then
      redis.call('HSET', K_STATS, 'vt', string.format('%d', served))
    end
  end
end

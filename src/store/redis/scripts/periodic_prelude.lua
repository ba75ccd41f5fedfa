-- postpone: helpers of the periodic scripts, after prelude.lua (see scripts.rs).
--
-- KEYS are the topic's keys (keys.rs), then its schedules hash ("<prefix>schedules": name -> schedule), last. A
-- schedule is "<next tick ms> <last enqueued tick ms|-> <pending trigger ms|-> <definition>"; the
-- definition is opaque here (the worker compares it whole).
local K_SCHEDULES = KEYS[#KEYS]

-- A stored schedule as a table: next, last (or nil), trigger (or nil), def.
local function schedule_of(v)
  local next_s, last_s, trigger_s, def = string.match(v, '^(%d+) (%S+) (%S+) (.*)$')
  return { next = tonumber(next_s), last = tonumber(last_s), trigger = tonumber(trigger_s), def = def }
end

local function ms_or_dash(ms)
  if ms then
    return string.format('%d', ms)
  end
  return '-'
end

-- A schedule table as stored.
local function schedule_str(s)
  return string.format('%d', s.next) .. ' ' .. ms_or_dash(s.last) .. ' ' .. ms_or_dash(s.trigger) .. ' ' .. s.def
end

-- Enqueues a tick's job as enqueue_one.lua does, due at `tick` (in the past: so due now), under its key
-- for fairness (`key`, '' for none): nothing changes when the id is live (due or active). Returns the
-- due time when it created the job (the caller counts the jobs it created in the history, with
-- `tally`).
local function put_tick(now, id, rec, tick, key)
  if redis.call('HSETNX', K_JOBS, id, rec) == 0 then
    if redis.call('ZSCORE', K_ACTIVE, id) or redis.call('ZSCORE', K_DUE, id) then
      return nil
    end
    -- A record with no due or active entry breaks the invariant: store the job as new.
    redis.call('HSET', K_JOBS, id, rec)
  end
  local at = resolve_due(now, 'at', tick)
  redis.call('ZADD', K_DUE, string.format('%d', at), id)
  fair_file_one(id, key, at, now)
  return at
end

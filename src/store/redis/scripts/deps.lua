-- postpone: jobs that wait for jobs (see store/workflow.rs and store/redis/workflow.rs), after
-- outcomes.lua, for the scripts that park a job, deliver its parents' ends to it, or end it.
--
-- A waiting job is in `due` at WAITING_MS (later than any due time: never claimed, and an enqueue of
-- its id finds it), its record in `jobs`, and in `waiting` (KEYS[25]): "<nonce> <policy> <left> <in|at>
-- <due value> <priority>[ <key for fairness>]\n<parent refs, one per line>" (a ref is "<store
-- topic>\t<id>"; a key holds no control character). `heard`
-- (KEYS[26]) holds "<id>\n<ref>" for each parent end counted (so a delivery repeated after a crash
-- counts once), and "<id>\n<nonce>\n<ref>" -> "<kind><reason>" for an end that arrived before its job
-- was parked (the few ms between following the parents and parking the job), listed in `preheard`
-- (KEYS[27], by when it arrived) so that those whose job never came (its enqueue failed, or it ended
-- at once) go after PREHEARD_MS.
local K_WAITING, K_HEARD, K_PREHEARD = KEYS[25], KEYS[26], KEYS[27]

local WAITING_MS = MAX_MS + 1

-- How long an end that arrived before its job was parked is kept for it, ms.
local PREHEARD_MS = 600000

-- Keeps an end that arrived before its job was parked; drops up to 10 such ends older than
-- PREHEARD_MS.
local function preheard(field, ended, now)
  if redis.call('HSETNX', K_HEARD, field, ended) == 1 then
    redis.call('ZADD', K_PREHEARD, now, field)
  end
  local old = redis.call('ZRANGE', K_PREHEARD, '-inf', now - PREHEARD_MS, 'BYSCORE', 'LIMIT', 0, 10)
  if #old > 0 then
    call_many('ZREM', K_PREHEARD, old, 1)
    call_many('HDEL', K_HEARD, old, 1)
  end
end

-- Takes an end kept for a job being parked (nil when none).
local function take_preheard(field)
  local ended = redis.call('HGET', K_HEARD, field)
  if ended then
    redis.call('HDEL', K_HEARD, field)
    redis.call('ZREM', K_PREHEARD, field)
  end
  return ended
end

-- A waiting job's info, parsed: nonce, policy, left, due kind, due value, priority, key ('' for none),
-- refs.
local function parse_waiting(info)
  local head, rest = string.match(info, '^([^\n]*)\n(.*)$')
  if not head then
    return nil
  end
  local nonce, policy, left, kind, value, prio, key = string.match(head, WAITING_KEYED)
  if not nonce then
    nonce, policy, left, kind, value, prio = string.match(head, '^(%S+) (%S+) (%d+) (%a+) (%-?%d+) (%d+)$')
    key = ''
  end
  if not nonce then
    return nil
  end
  local refs = {}
  for ref in string.gmatch(rest, '[^\n]+') do
    refs[#refs + 1] = ref
  end
  return { nonce = nonce, policy = policy, left = tonumber(left), kind = kind, value = tonumber(value), prio = prio, key = key, refs = refs }
end

local function waiting_info(w)
  local key = w.key ~= '' and ' ' .. w.key or ''
  return w.nonce .. ' ' .. w.policy .. ' ' .. string.format('%d', w.left) .. ' ' .. w.kind .. ' ' ..
    string.format('%d', w.value) .. ' ' .. w.prio .. key .. '\n' .. table.concat(w.refs, '\n')
end

-- "parent <topic>/<id> died: <reason>" or "... was cancelled", from a ref and an end.
local function parent_failure(ref, kind, reason)
  local topic, id = string.match(ref, '^([^\t]*)\t(.*)$')
  local name = (topic or '?') .. '/' .. (id or ref)
  if kind == 'c' then
    return 'parent ' .. name .. ' was cancelled'
  end
  return 'parent ' .. name .. ' died: ' .. (reason or '')
end

-- Forgets what `heard` holds for a job that stops waiting.
local function forget_heard(id, w)
  local fields = {}
  for _, ref in ipairs(w.refs) do
    fields[#fields + 1] = id .. '\n' .. ref
  end
  if #fields > 0 then
    call_many('HDEL', K_HEARD, fields, 1)
  end
end

-- Makes a job due at its asked time (its priority filed, and its key for fairness: '' for none), from
-- waiting or new; returns the due time.
local function make_due(channel, topic, id, kind, value, prio, key, now)
  local first = earliest(K_DUE)
  local at = resolve_due(now, kind, value)
  redis.call('ZADD', K_DUE, string.format('%d', at), id)
  if fair_file_one(id, key, at, now) then
    first = nil
  end
  if prio ~= '0' then
    redis.call('HSET', K_PRIO, id, prio)
    redis.call('HSET', K_STATS, 'prio', '1')
    P().file_prio({ id }, { at }, { prio }, now)
  end
  hint_if_earlier(channel, topic, first, at)
  return at
end

-- Ends a job (waiting, or being parked with record `rec`) by its policy after a parent failed: 'd'
-- (dead-lettered with `reason`) or 'c' (cancelled); what follows it hears of it. Returns the kind.
local function end_by_parent(channel, topic, id, rec, policy, reason, now)
  redis.call('ZREM', K_DUE, id)
  redis.call('HDEL', K_JOBS, id)
  local kind = policy == 'cancel' and 'c' or 'd'
  if kind == 'd' then
    P().kill_many({ id }, { rec }, { reason }, now)
    tally(now, 0, 0, 0, 0, 1)
  else
    redis.call('HINCRBY', K_STATS, 'cancelled', 1)
  end
  local flags = redis.call('HMGET', K_STATS, 'keep', 'waits', 'progress', 'follow')
  if flags[1] or flags[2] or flags[3] or flags[4] then
    outcome_helpers()
    O.after_end(flags[1], flags[2], flags[3], flags[4], channel, topic, { id }, { kind }, { kind == 'd' and reason or '' }, { rec }, now)
  end
  return kind
end

-- postpone: the keys for fairness of jobs as operators see them (job.lua, page.lua, find_prefix.lua,
-- fair_keys.lua), after fair.lua (and outcomes.lua, for `waiting`); kept out of fair.lua so that the
-- scripts that file, claim and end jobs make no closure for them.

-- Until when key `name` (its SHA-1) is held back, ms (0: not held): its hold (a handler's
-- `rate_limited`), or the time its rate lets it go when that is later. After fair_helpers().
local function key_held_until(name, now)
  local held = tonumber(redis.call('ZSCORE', F_KEYS.HOLD, name) or '0')
  local waits = tonumber(redis.call('ZSCORE', F_KEYS.WAIT, name) or '0')
  if waits > held and redis.call('ZSCORE', F_KEYS.TAT, name) then
    held = waits
  end
  return held > now and held or 0
end

-- Key `name`'s own limits (`flimit`, key_limits.lua) as their label ("<jobs>/<per ms>/<max
-- running>"), '' when it has none. After fair_helpers().
local function key_own_label(name)
  local own = redis.call('HGET', F_KEYS.LIMIT, name)
  return own and string.match(own, '^%S+ %S+ %S+ (%S+)') or ''
end

-- The key for fairness at the end of the first line of a job's entry in `waiting` (deps.lua); ''
-- for none.
local function waiting_key(info)
  if not info then
    return ''
  end
  local key = select(7, string.match(string.match(info, '^[^\n]*'), WAITING_KEYED))
  return key or ''
end

-- The keys for fairness of live jobs `ids` as operators see them ('' for none): their records'
-- (fair.lua's record_key), else, for a job that waits for jobs, its entry's in `waiting`
-- (`k_waiting`, when the script has that key).
local function listed_keys(ids, k_waiting)
  if #ids == 0 then
    return {}
  end
  local recs = fetch_many('HMGET', K_JOBS, ids)
  local keys, parked = {}, {}
  for i = 1, #ids do
    keys[i] = record_key(recs[i])
    if not keys[i] then
      keys[i] = ''
      parked[#parked + 1] = i
    end
  end
  if k_waiting and #parked > 0 and redis.call('EXISTS', k_waiting) == 1 then
    local names = {}
    for j, i in ipairs(parked) do
      names[j] = ids[i]
    end
    local infos = fetch_many('HMGET', k_waiting, names)
    for j, i in ipairs(parked) do
      keys[i] = waiting_key(infos[j])
    end
  end
  return keys
end

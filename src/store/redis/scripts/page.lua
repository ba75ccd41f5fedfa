-- One page of a topic's jobs in one state, in (score, member) order or its reverse, starting right
-- after a given entry (see OpsStore::page): O(log n + page), whatever the backlog.
-- ARGV: state ('due'|'waiting'|'active'|'dead'|'done'), order ('asc'|'desc'), limit, then, for a page
-- that starts after an entry, its score and member.
-- Returns seven fields per entry: member, score, record ('' when missing), stalls, holder (digits, '0'
-- when unknown), info ('<died at> <reason>' for a dead letter; a kept finished job's whole `done_jobs`
-- value, record and result included, with record ''; else ''), the job's key for fairness ('' for
-- none; a kept finished job has none).
-- Built with outcomes.lua (KEYS[17] to KEYS[20]) for the kept finished jobs; KEYS[25] is `waiting`.
local state, desc, limit = ARGV[1], ARGV[2] == 'desc', tonumber(ARGV[3])
local after_score, after = ARGV[4], ARGV[5]
local key = K_DUE
if state == 'active' then
  key = K_ACTIVE
elseif state == 'dead' then
  key = K_DEAD
elseif state == 'done' then
  key = K_DONE
end
-- The listing is the ranks [low, n) of `key`.
local low, n = 0, redis.call('ZCARD', key)
-- The markers of prelude_core.lua sort last in `active` (+inf): ranks past n are never listed.
if state == 'active' and n > 0 then
  n = n - redis.call('ZCOUNT', key, '+inf', '+inf')
end
-- Jobs waiting for jobs sort last in `due`, past MAX_MS (deps.lua), by id: the scheduled jobs are the
-- ranks before them, the waiting ones the ranks from there on.
if (state == 'due' or state == 'waiting') and redis.call('HLEN', KEYS[25]) > 0 then
  local scheduled = redis.call('ZCOUNT', key, '-inf', MAX_MS)
  if state == 'due' then
    n = scheduled
  else
    low = scheduled
  end
elseif state == 'waiting' then
  return {}
end

-- Bytewise a < b, as Redis orders members of equal score (Lua's `<` follows the server's locale).
local function less(a, b)
  local m = math.min(#a, #b)
  for i = 1, m do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- How many members sort before (after_score, after), and whether that entry is still there.
local function rank_of()
  local s = redis.call('ZSCORE', key, after)
  if s and tonumber(s) == tonumber(after_score) then
    return redis.call('ZRANK', key, after), true
  end
  -- Gone or moved: its place among the members of its score, by binary search over ranks.
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. after_score)
  local hi = math.min(redis.call('ZCOUNT', key, '-inf', after_score), n)
  lo = math.max(lo, low)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if less(redis.call('ZRANGE', key, mid, mid)[1], after) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo, false
end

local first, last
if desc then
  local stop = n
  if after then
    stop = math.min(rank_of(), n)
  end
  first, last = math.max(low, stop - limit), stop - 1
else
  first = low
  if after then
    local r, found = rank_of()
    first = math.max(r + (found and 1 or 0), low)
  end
  last = math.min(first + limit, n) - 1
end
if limit <= 0 or last < first then
  return {}
end
local got = redis.call('ZRANGE', key, first, last, 'WITHSCORES')
local members, scores = {}, {}
for i = 1, #got / 2 do
  members[i], scores[i] = got[2 * i - 1], got[2 * i]
end
if desc then
  local m, s = {}, {}
  for i = #members, 1, -1 do
    m[#m + 1], s[#s + 1] = members[i], scores[i]
  end
  members, scores = m, s
end
if #members == 0 then
  return {}
end
if state == 'dead' then
  return P().dead_entries({}, members, scores)
end
if state == 'done' then
  local kept = fetch_many('HMGET', K_DONE_JOBS, members)
  local out = {}
  for i, id in ipairs(members) do
    local b = #out
    out[b + 1], out[b + 2], out[b + 3] = id, scores[i], ''
    out[b + 4], out[b + 5], out[b + 6] = 0, '0', kept[i] or ''
    out[b + 7] = ''
  end
  return out
end
local keys = listed_keys(members, state == 'waiting' and KEYS[25] or nil)
return P().live_entries({}, members, scores, state == 'active', keys)

-- One bounded step of a search for a topic's jobs in one state whose id starts with a prefix (see
-- OpsStore::find_prefix).
-- ARGV: state ('due'|'waiting'|'active'|'dead'), prefix, cursor ('' for the first step), limit.
-- Returns the next cursor ('' when the search is complete), then page.lua's seven fields per entry.
-- Built with outcomes.lua: KEYS[25] is `waiting` (a waiting job's key for fairness is in its entry).
-- Dead letters: a range of `dead_ids` by lex, at most `limit`, in id order; the cursor is the last
-- member. Live jobs: one ZSCAN step of `due` or `active` (COUNT limit) matching the prefix; the cursor is
-- ZSCAN's. Jobs waiting for jobs are the members of `due` past MAX_MS (deps.lua): a search of 'due'
-- leaves them out, one of 'waiting' finds only them.
local state, prefix, cursor, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local out = { '' }
if state == 'dead' then
  local from = '[' .. prefix
  if cursor ~= '' then
    from = '(' .. cursor
  end
  -- Ids are UTF-8, which never holds the byte 0xff: every id with the prefix sorts before prefix..0xff.
  local members = redis.call('ZRANGE', K_DEAD_IDS, from, '(' .. prefix .. '\255', 'BYLEX', 'LIMIT', 0, limit)
  if #members == 0 then
    return out
  end
  if #members == limit then
    out[1] = members[#members]
  end
  return P().dead_entries(out, members, fetch_many('ZMSCORE', K_DEAD, members))
end

local key = K_DUE
if state == 'active' then
  key = K_ACTIVE
end
local pattern = string.gsub(prefix, '[%*%?%[%]\\]', '\\%0') .. '*'
local step = redis.call('ZSCAN', key, cursor == '' and '0' or cursor, 'MATCH', pattern, 'COUNT', limit)
if step[1] ~= '0' then
  out[1] = step[1]
end
local ids, scores = {}, {}
for i = 1, #step[2], 2 do
  local keep = step[2][i] ~= HASHED and step[2][i] ~= FAIR_MARK
  if state == 'due' or state == 'waiting' then
    keep = (tonumber(step[2][i + 1]) > MAX_MS) == (state == 'waiting')
  end
  if keep then
    ids[#ids + 1] = step[2][i]
    scores[#scores + 1] = step[2][i + 1]
  end
end
if #ids == 0 then
  return out
end
local keys = listed_keys(ids, state == 'waiting' and KEYS[25] or nil)
return P().live_entries(out, ids, scores, state == 'active', keys)

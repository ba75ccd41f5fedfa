-- Cancels live jobs by id, each on its own, in order (one id, or the ids of coalesced calls).
-- ARGV: the wake channel, the topic, then ids. Returns per id: 1 removed (it was due), 2 marked (it is
-- running), 3 not found. A removed job is kept, announced, its progress forgotten and its followers
-- told as in finish.lua (see outcomes.lua); one waiting for jobs stops waiting (KEYS[25] is
-- `waiting`, KEYS[26] `heard`: see deps.lua).
local channel, topic = ARGV[1], ARGV[2]
local out, removed = {}, {}
local recs = {}
local flags = redis.call('HMGET', K_STATS, 'keep', 'waits', 'progress', 'follow', 'fair')
for i = 3, #ARGV do
  local id = ARGV[i]
  local due_at = redis.call('ZSCORE', K_DUE, id)
  if due_at and tonumber(due_at) > MAX_MS then
    -- Waiting for jobs (deps.lua): it stops waiting (the parents' later ends find it gone).
    local info = redis.call('HGET', KEYS[25], id) or ''
    for ref in string.gmatch(string.match(info, '\n(.*)$') or '', '[^\n]+') do
      redis.call('HDEL', KEYS[26], id .. '\n' .. ref)
    end
    redis.call('HDEL', KEYS[25], id)
  end
  if due_at and redis.call('ZREM', K_DUE, id) == 1 then
    -- Its record: kept with it, and where its key for fairness is (fair.lua).
    local rec = (flags[1] or flags[5]) and redis.call('HGET', K_JOBS, id)
    if flags[1] then
      recs[#removed + 1] = rec or ''
    end
    redis.call('HDEL', K_JOBS, id)
    redis.call('HDEL', K_STALLS, id)
    if redis.call('HDEL', K_PRIO, id) == 1 then
      redis.call('ZREM', K_PRIO_READY, id)
      redis.call('ZREM', K_PRIO_WAIT, id)
    end
    if flags[5] then
      fair_helpers()
      F.cancel(id, rec)
    end
    removed[#removed + 1] = id
    out[i - 2] = 1
  elseif redis.call('ZSCORE', K_ACTIVE, id) then
    redis.call('SADD', K_CANCELS, id)
    out[i - 2] = 2
  else
    out[i - 2] = 3
  end
end
if #removed > 0 then
  redis.call('HINCRBY', K_STATS, 'cancelled', #removed)
  if flags[1] or flags[2] or flags[3] or flags[4] then
    outcome_helpers()
    local kinds = {}
    for i = 1, #removed do
      kinds[i] = 'c'
    end
    O.after_end(flags[1], flags[2], flags[3], flags[4], channel, topic, removed, kinds, {}, recs, now_ms())
  end
end
return out

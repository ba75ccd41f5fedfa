-- Creates a batch or adds members to an open one, in one step (all or none), staging each new member
-- for workflow.rs to enqueue into its topic (see batch_prelude.lua).
-- ARGV: 'create'|'add', close ('1'|'0'), description, callback count, then per callback its kind and
-- its entry, then per member its ref ("<store topic>\t<id>") and its entry.
-- Returns: 1 done, 2 exists (a create), 3 closed, 4 not found (an add); then, when done, per member
-- its staged number (0: a member already), then how many callbacks fired (closing it completed it).
local now = now_ms()
local mode, close, desc, ncb = ARGV[1], ARGV[2] == '1', ARGV[3], tonumber(ARGV[4])
local exists = redis.call('EXISTS', K_BATCH) == 1
if mode == 'create' then
  if exists then
    return { 2 }
  end
  redis.call('HSET', K_BATCH, 'created', string.format('%d', now), 'desc', desc, 'total', 0, 'succeeded', 0,
    'dead', 0, 'cancelled', 0, 'closed', 0, 'seq', 0, 'stage', 0)
  -- A kind given twice: the first counts.
  for i = 1, ncb do
    redis.call('HSETNX', K_BATCH, 'cb:' .. ARGV[3 + 2 * i], ARGV[4 + 2 * i])
  end
elseif not exists then
  return { 4 }
elseif redis.call('HGET', K_BATCH, 'closed') == '1' then
  return { 3 }
end
local first = 5 + 2 * ncb
local refs = {}
for i = first, #ARGV, 2 do
  refs[#refs + 1] = ARGV[i]
end
local known = fetch_many('ZMSCORE', K_MEMBERS, refs)
local c = redis.call('HMGET', K_BATCH, 'seq', 'stage')
local seq, stage = tonumber(c[1]), tonumber(c[2])
local out = { 1 }
local members, staged, seen = {}, {}, {}
for k, ref in ipairs(refs) do
  if known[k] or seen[ref] then
    out[k + 1] = 0
  else
    seen[ref] = true
    seq, stage = seq + 1, stage + 1
    members[#members + 1] = seq * 4
    members[#members + 1] = ref
    staged[#staged + 1] = stage
    staged[#staged + 1] = ARGV[first + 2 * k - 1]
    out[k + 1] = stage
  end
end
if #members > 0 then
  call_many('ZADD', K_MEMBERS, members, 2)
  call_many('HSET', K_STAGED, staged, 2)
  redis.call('HSET', K_BATCH, 'seq', seq, 'stage', stage)
  redis.call('HINCRBY', K_BATCH, 'total', #members / 2)
end
local fired = 0
if close then
  redis.call('HSET', K_BATCH, 'closed', '1')
  fired = settle(now)
end
out[#out + 1] = fired
return out

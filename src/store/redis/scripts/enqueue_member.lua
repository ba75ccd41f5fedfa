-- Enqueues a batch's members (or fired callbacks) into one topic, each at most once per delivery token
-- (enqueue_once.lua's body, which scripts.rs wraps as `enqueue_once_jobs(ARGV)`), and makes the batch
-- a follower of each member in the same step: the job's first end is then recorded for it (see
-- outcomes.lua, `record_ends`). A member whose id is live already (due or running) is that job.
-- KEYS: the topic's sixteen, its `delivered` zset, its `follows` hash.
-- ARGV: channel, topic, keep (ms), the follower's ref ("b:<batch id>"; '' for callbacks: nothing
-- follows them), then per job enqueue_once.lua's eight fields (token, then enqueue.lua's seven).
-- Returns enqueue_once.lua's reply: two integers per job, 0 0 for a token delivered before.
local K_FOLLOWS = KEYS[18]
local ref = ARGV[4]
local args = { ARGV[1], ARGV[2], ARGV[3] }
for i = 5, #ARGV do
  args[#args + 1] = ARGV[i]
end
local out = enqueue_once_jobs(args)
if ref ~= '' then
  -- Only the jobs whose token was new: a token delivered before made its job a member already.
  local ids = {}
  for i = 1, (#args - 3) / 8 do
    if out[2 * i - 1] ~= 0 then
      ids[#ids + 1] = args[3 + (i - 1) * 8 + 2]
    end
  end
  if #ids > 0 then
    local current = fetch_many('HMGET', K_FOLLOWS, ids)
    local set = {}
    for i, id in ipairs(ids) do
      local now_refs = current[i]
      if not now_refs then
        set[#set + 1] = id
        set[#set + 1] = ref
      elseif not string.find('\n' .. now_refs .. '\n', '\n' .. ref .. '\n', 1, true) then
        set[#set + 1] = id
        set[#set + 1] = now_refs .. '\n' .. ref
      end
    end
    if #set > 0 then
      call_many('HSET', K_FOLLOWS, set, 2)
      redis.call('HSET', K_STATS, 'follow', '1')
    end
  end
end
return out

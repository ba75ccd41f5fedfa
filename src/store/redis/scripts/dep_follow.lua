-- Makes a job that will wait follow a parent, when the parent is live (due, waiting or running): its
-- end is then recorded for the follower (outcomes.lua, `record_ends`).
-- ARGV: the parent's id, the follower's ref ("j:<store topic>\t<id>\t<nonce>"), and '1' to stop
-- following instead (an enqueue that failed after following).
-- Returns 1 followed (or unfollowed), 0 the parent is not live.
local id, ref = ARGV[1], ARGV[2]
local refs = redis.call('HGET', K_FOLLOWS, id)
if ARGV[3] == '1' then
  if refs then
    local kept = {}
    for r in string.gmatch(refs, '[^\n]+') do
      if r ~= ref then
        kept[#kept + 1] = r
      end
    end
    if #kept == 0 then
      redis.call('HDEL', K_FOLLOWS, id)
    else
      redis.call('HSET', K_FOLLOWS, id, table.concat(kept, '\n'))
    end
  end
  return 1
end
if not (redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_ACTIVE, id)) then
  return 0
end
if not refs then
  redis.call('HSET', K_FOLLOWS, id, ref)
elseif not string.find('\n' .. refs .. '\n', '\n' .. ref .. '\n', 1, true) then
  redis.call('HSET', K_FOLLOWS, id, refs .. '\n' .. ref)
end
redis.call('HSET', K_STATS, 'follow', '1')
return 1

-- Moves due jobs to new due times, each on its own, in order (one job, or those of coalesced calls);
-- hints once when one of them is now earlier than the topic's earliest before the call.
-- ARGV: channel, topic, then per job three fields: id, 'in'|'at', value (ms).
-- Returns two integers per job: {1, due time} rescheduled, {2, 0} running, {3, 0} not found, {4, 0}
-- waiting for jobs.
local channel, topic = ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 3
local now, first, hint = nil, nil, nil
local out = {}
for i = 1, n do
  local b = 2 + (i - 1) * 3
  local id = ARGV[b + 1]
  local current = redis.call('ZSCORE', K_DUE, id)
  if current and tonumber(current) > MAX_MS then
    -- Waiting for jobs (deps.lua): no due time to move.
    out[2 * i - 1] = 4
    out[2 * i] = 0
  elseif current then
    if now == nil then
      now = now_ms()
      first = earliest(K_DUE)
    end
    local at = resolve_due(now, ARGV[b + 2], tonumber(ARGV[b + 3]))
    redis.call('ZADD', K_DUE, string.format('%d', at), id)
    -- A job with a priority keeps it, filed by its new due time.
    local prio = redis.call('HGET', K_PRIO, id)
    if prio then
      redis.call('ZREM', K_PRIO_READY, id)
      redis.call('ZREM', K_PRIO_WAIT, id)
      P().file_prio({ id }, { at }, { prio }, now)
    end
    -- A keyed job is filed under its key by its new due time (fair.lua).
    if redis.call('HEXISTS', K_STATS, 'fair') == 1 then
      fair_helpers()
      if F.refile({ id }, { at }, now) then
        hint, first = now, nil
      end
    end
    if hint == nil or at < hint then
      hint = at
    end
    out[2 * i - 1] = 1
    out[2 * i] = at
  elseif redis.call('ZSCORE', K_ACTIVE, id) then
    out[2 * i - 1] = 2
    out[2 * i] = 0
  else
    out[2 * i - 1] = 3
    out[2 * i] = 0
  end
end
hint_if_earlier(channel, topic, first, hint)
return out

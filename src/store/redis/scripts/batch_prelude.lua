-- postpone: what the batch scripts share (see store/redis/workflow.rs), after prelude_core.lua. KEYS
-- are one batch's three keys (its own hash tag and slot): its hash, its members, its staged entries.
--
-- The hash: `created`, `desc`, `total`, `succeeded`, `dead`, `cancelled`, `closed` (0|1), `completed`
-- (ms, once closed with every member ended), `seq` (members numbered so far), `stage` (staged entries
-- numbered so far), `cb:<kind>` (a callback's job, as the client encoded it) and `fired:<kind>`.
-- Members: "<store topic>\t<id>" -> number x 4 + state (0 pending, 1 succeeded, 2 dead, 3 cancelled).
-- Staged: number -> an entry (a member or a fired callback) committed here and not yet known to be in
-- its topic; workflow.rs enqueues it (at most once, by a token made of the batch and the number) and
-- then deletes it here.
local K_BATCH, K_MEMBERS, K_STAGED = KEYS[1], KEYS[2], KEYS[3]

-- Stages fired callback `kind` (when the batch has one and it has not fired); returns 1 if it did.
local function fire(kind)
  local cb = redis.call('HGET', K_BATCH, 'cb:' .. kind)
  if not cb or redis.call('HSETNX', K_BATCH, 'fired:' .. kind, '1') == 0 then
    return 0
  end
  local n = redis.call('HINCRBY', K_BATCH, 'stage', 1)
  redis.call('HSET', K_STAGED, n, cb)
  return 1
end

-- Completes the batch when it is closed and every member ended: `completed`, then the success
-- callback (every member succeeded) and the completion callback fire. Returns how many fired.
local function settle(now)
  local b = redis.call('HMGET', K_BATCH, 'closed', 'completed', 'total', 'succeeded', 'dead', 'cancelled')
  if b[1] ~= '1' or b[2] then
    return 0
  end
  local total, ok = tonumber(b[3]), tonumber(b[4])
  if ok + tonumber(b[5]) + tonumber(b[6]) < total then
    return 0
  end
  redis.call('HSET', K_BATCH, 'completed', string.format('%d', now))
  local fired = 0
  if ok == total then
    fired = fired + fire('success')
  end
  return fired + fire('complete')
end

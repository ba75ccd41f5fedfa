-- postpone: finished jobs kept, waiters, progress and followers (see keys.rs, store/outcome.rs and
-- store/redis/workflow.rs), after the prelude, for the scripts that end jobs or read outcomes. Their
-- five keys follow the topic's sixteen (KEYS[17] to KEYS[21]), then the three of followers (KEYS[22]
-- to KEYS[24]) and the three of jobs waiting for jobs (KEYS[25] to KEYS[27], see deps.lua). What they cost a topic that keeps nothing, that nobody waits for and that no batch
-- follows: four more fields read in the stats hash, which the script reads anyway, and one closure
-- per call: the helpers are made by `outcome_helpers()`, which a script calls only once it needs them
-- (every function a script defines is a closure made at every call; see prelude_core.lua).
--
-- Stats fields: `keep` "<max age ms> <max count>" (the topic's retention, written by retain.lua),
-- `waits` (set while `waited` may hold an id), `progress` (set while `progress` may hold an id),
-- `follow` (set while `follows` may hold an id), `ends` (set while `ends` may hold an end).
--
-- Followers (batches; see store/redis/workflow.rs): `follows` maps a job id to the refs that follow it
-- ("b:<batch id>", one per line). The job's first end moves them, with how it ended, into `end_info`
-- under a new number (`end_seq` in stats), listed in `ends` (number -> when it may next be delivered);
-- workflow.rs delivers and then forgets it. KEYS[22] to KEYS[24].
local K_DONE, K_DONE_JOBS, K_WAITED, K_PROGRESS, K_TOLD = KEYS[17], KEYS[18], KEYS[19], KEYS[20], KEYS[21]
local K_FOLLOWS, K_ENDS, K_END_INFO = KEYS[22], KEYS[23], KEYS[24]

-- Most kept jobs one trim deletes beyond what its caller kept (bounded steps).
local TRIM_EXTRA = 16

-- The helpers other scripts call (`O.after_end`...), made by outcome_helpers(): in a table, not in
-- locals of the script, which the closure of outcome_helpers would capture (an upvalue allocated at
-- every call of every script that has this file; see fair.lua's `F`). A function library keeps `O` from
-- call to call (its helpers capture only the library's locals, which each call assigns).
local O = nil

-- Makes the helpers below (call before using any of them).
local function outcome_helpers()
  if O then
    return
  end
  -- A kept finished job: "<s|c> <finished ms> <record length>\n<record><result>".
  local function done_value(state, now, rec, result)
    return state .. ' ' .. string.format('%d', now) .. ' ' .. #rec .. '\n' .. rec .. result
  end

  -- The retention in a `keep` stats value: max age ms, max count; nil when none.
  local function parse_keep(keep)
    if not keep then
      return nil
    end
    local age, count = string.match(keep, '^(%d+) (%d+)$')
    if not age then
      return nil
    end
    return tonumber(age), tonumber(count)
  end

  -- Deletes kept jobs older than `age` ms or beyond the newest `count` (all when `age` is nil), oldest
  -- first, at most `limit`; returns how many.
  local function trim_done(age, count, now, limit)
    if limit <= 0 then
      return 0
    end
    local old
    if age == nil then
      old = redis.call('ZRANGE', K_DONE, 0, limit - 1)
    else
      old = redis.call('ZRANGE', K_DONE, '-inf', '(' .. string.format('%d', now - age), 'BYSCORE', 'LIMIT', 0, limit)
      local over = redis.call('ZCARD', K_DONE) - #old - count
      if over > 0 and #old < limit then
        local more = redis.call('ZRANGE', K_DONE, #old, #old + math.min(over, limit - #old) - 1)
        for _, id in ipairs(more) do
          old[#old + 1] = id
        end
      end
    end
    if #old > 0 then
      call_many('ZREM', K_DONE, old, 1)
      call_many('HDEL', K_DONE_JOBS, old, 1)
    end
    return #old
  end

  -- Keeps finished jobs (`values` from done_value, by id) at `now` under retention `keep` (a stats
  -- value), and trims beyond it. Does nothing without a retention.
  local function keep_done(keep, ids, values, now)
    local age, count = parse_keep(keep)
    if not age or #ids == 0 then
      return
    end
    local scored, fields = {}, {}
    local now_s = string.format('%d', now)
    for i, id in ipairs(ids) do
      scored[2 * i - 1], scored[2 * i] = now_s, id
      fields[2 * i - 1], fields[2 * i] = id, values[i]
    end
    call_many('ZADD', K_DONE, scored, 2)
    call_many('HSET', K_DONE_JOBS, fields, 2)
    trim_done(age, count, now, #ids + TRIM_EXTRA)
  end

  -- The channel of announcements, from the wake channel's name ("postpone:{<ns>}:wake").
  local function ended_channel(wake)
    return string.sub(wake, 1, -5) .. 'ended'
  end

  -- Announces how jobs ended to their waiters, for the ids that `waited` holds (call only when `waits` is
  -- set in stats): one message each, "<topic>\n<id>\n<kind><data>", kind 's' (data: the result), 'c' or
  -- 'd' (data: the reason); and tells it ("<now> <kind><data>" in `told`) for as long as the id stays in
  -- `waited`, so that a waiter whose message was lost (a reconnect) finds it when it looks again.
  local function announce(wake, topic, ids, kinds, data, now)
    if #ids == 0 then
      return
    end
    local waited = fetch_many('ZMSCORE', K_WAITED, ids)
    local told = {}
    local channel = ended_channel(wake)
    local at = string.format('%d', now) .. ' '
    for i, id in ipairs(ids) do
      if waited[i] then
        local end_of = kinds[i] .. (data[i] or '')
        redis.call('PUBLISH', channel, topic .. '\n' .. id .. '\n' .. end_of)
        told[#told + 1] = id
        told[#told + 1] = at .. end_of
      end
    end
    if #told > 0 then
      call_many('HSET', K_TOLD, told, 2)
    end
  end

  -- Drops up to `limit` waiters whose time ended (and what they were told); with the last, `waits`.
  local function drop_waiters(now, limit)
    local old = redis.call('ZRANGE', K_WAITED, '-inf', '(' .. string.format('%d', now), 'BYSCORE', 'LIMIT', 0, limit)
    if #old > 0 then
      call_many('ZREM', K_WAITED, old, 1)
      call_many('HDEL', K_TOLD, old, 1)
      if redis.call('ZCARD', K_WAITED) == 0 then
        redis.call('HDEL', K_STATS, 'waits')
      end
    end
  end

  -- Forgets the progress of jobs that end (call only when `progress` is set in stats).
  local function forget_progress(ids)
    if #ids > 0 then
      call_many('HDEL', K_PROGRESS, ids, 1)
      if redis.call('HLEN', K_PROGRESS) == 0 then
        redis.call('HDEL', K_STATS, 'progress')
      end
    end
  end

  -- Records the ends of the jobs that something follows (call only when `follow` is set in stats):
  -- "<kind> <id length> <refs length>\n<id><refs><reason>" in `end_info` (a success's result is not
  -- kept: followers need only how it ended), listed in `ends` as due now; the followers go, and with
  -- the last of them `follow`. Sends a hint when it recorded any, so that a worker of the topic
  -- claims, learns of them (the claim's `ends` flag) and delivers them.
  local function record_ends(wake, topic, ids, kinds, data, now)
    local refs = fetch_many('HMGET', K_FOLLOWS, ids)
    local followed = {}
    for i, id in ipairs(ids) do
      if refs[i] then
        followed[#followed + 1] = i
      end
    end
    if #followed == 0 then
      return
    end
    local last = redis.call('HINCRBY', K_STATS, 'end_seq', #followed)
    local listed, infos, gone = {}, {}, {}
    local now_s = string.format('%d', now)
    for k, i in ipairs(followed) do
      local seq = string.format('%d', last - #followed + k)
      local reason = kinds[i] == 's' and '' or (data[i] or '')
      listed[#listed + 1] = now_s
      listed[#listed + 1] = seq
      infos[#infos + 1] = seq
      infos[#infos + 1] = kinds[i] .. ' ' .. #ids[i] .. ' ' .. #refs[i] .. '\n' .. ids[i] .. refs[i] .. reason
      gone[#gone + 1] = ids[i]
    end
    call_many('ZADD', K_ENDS, listed, 2)
    call_many('HSET', K_END_INFO, infos, 2)
    call_many('HDEL', K_FOLLOWS, gone, 1)
    if redis.call('HLEN', K_FOLLOWS) == 0 then
      redis.call('HDEL', K_STATS, 'follow')
    end
    redis.call('HSET', K_STATS, 'ends', '1')
    publish_hint(wake, topic, now)
  end

  -- What follows the end of jobs (`ids`; `kinds` 's', 'c' or 'd'; `data` their results or reasons;
  -- `recs` their records, read while `keep` is set), given the `keep`, `waits`, `progress` and
  -- `follow` stats fields: succeeded and cancelled ones kept, all announced and told, their progress
  -- forgotten, their followers' ends recorded.
  local function after_end(keep, waits, progress, follow, wake, topic, ids, kinds, data, recs, now)
    if keep then
      local kept, values = {}, {}
      for i, id in ipairs(ids) do
        if kinds[i] ~= 'd' then
          kept[#kept + 1] = id
          local result = kinds[i] == 's' and data[i] or ''
          values[#kept] = done_value(kinds[i], now, recs[i] or '', result or '')
        end
      end
      keep_done(keep, kept, values, now)
    end
    if waits then
      announce(wake, topic, ids, kinds, data, now)
    end
    if progress then
      forget_progress(ids)
    end
    if follow then
      record_ends(wake, topic, ids, kinds, data, now)
    end
  end
  O = {
    trim_done = trim_done, ended_channel = ended_channel, drop_waiters = drop_waiters,
    record_ends = record_ends, after_end = after_end,
  }
end

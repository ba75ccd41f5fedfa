-- The busiest keys of a topic's keyed jobs, for operators (see fair.lua and OpsStore::keys): a sample
-- of at most `sample` keys from each of the ready keys, the waiting ones and those running jobs, each
-- with its queue's length, its running jobs and until when it is held back; never a scan of every key.
-- ARGV: limit (keys returned), sample.
-- Returns: keys with a job queued (ready, waiting, and parked at their max running among the sampled
-- running ones), 1 when the sample may
-- have missed keys (0: every key was looked at), whether running jobs are counted (1: a limit per key
-- counts them), the limits per key the workers last claimed under (`kflow` in stats: "<jobs>/<per
-- ms>/<max running>", '' when none yet), then per key, busiest first: key, queued, running, held until
-- (ms, 0: not held), its own limits' label ('' when none).
local limit, sample = tonumber(ARGV[1]), tonumber(ARGV[2])
fair_helpers()
local now = now_ms()
local seen, names = {}, {}
local function add(name)
  if not seen[name] then
    seen[name] = true
    names[#names + 1] = name
  end
end
local n_ready, n_wait = redis.call('ZCARD', F_KEYS.READY), redis.call('ZCARD', F_KEYS.WAIT)
for _, name in ipairs(redis.call('ZRANGE', F_KEYS.READY, 0, sample - 1)) do
  add(name)
end
for _, name in ipairs(redis.call('ZRANGE', F_KEYS.WAIT, 0, sample - 1)) do
  add(name)
end
local running = redis.call('HSCAN', F_KEYS.RUN, 0, 'COUNT', sample)
for i = 1, #running[2], 2 do
  add(running[2][i])
end
local partial = n_ready > sample or n_wait > sample or running[1] ~= '0'
-- Keys parked at their max running: in neither set, with jobs queued.
local parked = 0
for i = 1, #running[2], 2 do
  local name = running[2][i]
  if not redis.call('ZSCORE', F_KEYS.READY, name) and not redis.call('ZSCORE', F_KEYS.WAIT, name)
    and F.has_queue(name) then
    parked = parked + 1
  end
end
local rows = {}
for _, name in ipairs(names) do
  local head, queued = F.queue_head(name, 4)
  -- The key's text, from the record of the first of its queued jobs still live ('' for the jobs
  -- without a key, filed under the key '').
  local key = nil
  if name == key_name('') then
    key = ''
  else
    for _, id in ipairs(head) do
      key = record_key(redis.call('HGET', K_JOBS, id))
      if key then
        break
      end
    end
  end
  if key then
    rows[#rows + 1] = { key, queued, tonumber(redis.call('HGET', F_KEYS.RUN, name) or '0'), key_held_until(name, now),
      key_own_label(name) }
  end
end
table.sort(rows, function(a, b)
  if a[2] ~= b[2] then
    return a[2] > b[2]
  end
  return a[1] < b[1]
end)
local out = { n_ready + n_wait + parked, partial and 1 or 0, redis.call('EXISTS', F_KEYS.RUN), redis.call('HGET', K_STATS, 'kflow') or '' }
for i = 1, math.min(limit, #rows) do
  for _, v in ipairs(rows[i]) do
    out[#out + 1] = v
  end
end
return out

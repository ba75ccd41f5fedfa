-- Records running jobs' progress, each only if its token matches its lease, and announces it to their
-- waiters (who keep waiting). See WorkerStore::progress and outcomes.lua.
-- ARGV: the wake channel, the topic, then per update: id, token, progress ("<value> <message>").
outcome_helpers()
local channel, topic = ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 3
local ids = {}
for i = 1, n do
  ids[i] = ARGV[3 * i]
end
local leases = fetch_many('HMGET', K_LEASES, ids)
local fields, held, values = {}, {}, {}
for i = 1, n do
  if held_by(leases[i], ARGV[3 * i + 1]) then
    held[#held + 1] = ids[i]
    values[#held] = ARGV[3 * i + 2]
    fields[#fields + 1] = ids[i]
    fields[#fields + 1] = ARGV[3 * i + 2]
  end
end
if #held == 0 then
  return 0
end
call_many('HSET', K_PROGRESS, fields, 2)
local flags = redis.call('HMGET', K_STATS, 'progress', 'waits')
if not flags[1] then
  redis.call('HSET', K_STATS, 'progress', '1')
end
if flags[2] then
  local waited = fetch_many('ZMSCORE', K_WAITED, held)
  local ch = O.ended_channel(channel)
  for i, id in ipairs(held) do
    if waited[i] then
      redis.call('PUBLISH', ch, topic .. '\n' .. id .. '\np' .. values[i])
    end
  end
end
return #held

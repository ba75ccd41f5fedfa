-- A topic's per-minute history for the last ARGV[1] minutes (the current one included), oldest first.
-- Returns six integers per minute that has counts: minute (ms), enqueued, processed, retried, failed,
-- dead. Fields written more than HISTORY_MINUTES ago hold an older minute and count as nothing.
local minutes = math.min(tonumber(ARGV[1]), HISTORY_MINUTES)
local now_minute = math.floor(now_ms() / 60000)
local fields = {}
for m = now_minute - minutes + 1, now_minute do
  local slot = m % HISTORY_MINUTES
  for k = 1, 5 do
    fields[#fields + 1] = slot .. HISTORY_KINDS[k]
  end
end
if #fields == 0 then
  return {}
end
local values = fetch_many('HMGET', K_HISTORY, fields)
local out = {}
for i = 1, minutes do
  local minute = now_minute - minutes + i
  local c, any = {}, false
  for k = 1, 5 do
    c[k] = history_count(values[(i - 1) * 5 + k], minute)
    any = any or c[k] > 0
  end
  if any then
    out[#out + 1] = minute * 60000
    for k = 1, 5 do
      out[#out + 1] = c[k]
    end
  end
end
return out

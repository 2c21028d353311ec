--! keys caller
-- ironic-stats(KEYS[1]=the queue's counters, KEYS[2]=the undeliverable stream,
-- KEYS[3]=the folded records' start times, KEYS[4]=the workers, KEYS[5..]=every
-- partition's queue stream; ARGV: how many recent undeliverable records, the workers'
-- liveness window in ms).
-- Answers {store ms now, counters as field, value, ..., queued entries, the oldest
-- pending change's time (store ms, -1: none), folded nodes, recent undeliverable
-- records (newest first), live workers}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = -1
local function older(ms)
  if oldest < 0 or ms < oldest then
    oldest = ms
  end
end
local queued = 0
for i = 5, #KEYS do
  queued = queued + redis.call('XLEN', KEYS[i])
  local first = redis.call('XRANGE', KEYS[i], '-', '+', 'COUNT', 1)[1]
  if first then
    older(tonumber(string.match(first[1], '^(%d+)')))
  end
end
local folded = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if folded[2] then
  older(tonumber(folded[2]))
end
local recent = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', tonumber(ARGV[1]))
local live = redis.call('ZCOUNT', KEYS[4], now - tonumber(ARGV[2]), '+inf')
return { now, redis.call('HGETALL', KEYS[1]), queued, oldest, redis.call('ZCARD', KEYS[3]), recent, live }

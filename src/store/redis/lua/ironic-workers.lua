--! keys 1
-- ironic-workers(KEYS[1]=the delivery workers; ARGV: this worker, the liveness window in
-- ms, '1' when it leaves). A heartbeat by the store's clock: answers how many workers
-- were heard within the window (itself included unless it leaves). Workers silent for
-- a hundred windows are forgotten.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 100 * window)
return redis.call('ZCOUNT', KEYS[1], now - window, '+inf')

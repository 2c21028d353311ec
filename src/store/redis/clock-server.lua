-- Store clock: Redis server time in integer microseconds. Expiry is judged with this
-- clock only, never with the caller's.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- When this Redis process started, never earlier than it really did: after a restart that
-- lost every key, shards with no history wait one TTL from here. Redis counts uptime as
-- the difference of two whole-second clocks, so it can read 1 s a moment after the start;
-- one more second keeps the estimate late.
local function boot_us(now)
  local info = redis.call('INFO', 'server')
  local uptime_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  return now - (uptime_s - 1) * 1000000
end

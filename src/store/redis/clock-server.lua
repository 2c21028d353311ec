-- Store clock: Redis server time in integer microseconds. Expiry is judged with this
-- clock only, never with the caller's.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

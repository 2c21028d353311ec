-- Virtual store clock for the differential test: the caller passes the store's start
-- and "now", in microseconds, as the last two arguments, so the scripts and the pure
-- state machine can be driven through the same timeline. Never used by a running bridge.
local function clock_us()
  return tonumber(ARGV[#ARGV])
end

local function boot_us(now)
  return tonumber(ARGV[#ARGV - 1])
end

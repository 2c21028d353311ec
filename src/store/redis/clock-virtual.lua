-- Virtual store clock for the differential test: the caller passes "now" in microseconds
-- as the last argument, so the scripts and the pure state machine can be driven through
-- the same timeline. Never used by a running bridge.
local function clock_us()
  return tonumber(ARGV[#ARGV])
end

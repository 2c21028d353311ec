--! fragment
-- Virtual store clock for the differential test: the caller passes the store's lineage
-- (promoted '1'/'0', id, '' for none), its start and "now", in microseconds, as the last
-- four arguments, so the scripts and the pure state machine can be driven through the
-- same timeline. Never used by a running bridge.
local function clock_us()
  return tonumber(ARGV[#ARGV])
end

local function boot_us(now)
  return tonumber(ARGV[#ARGV - 1])
end

-- Nothing for the caller to keep: the differential test passes the lineage every time.
local lineage_seen = nil

local function store_lineage()
  local id = ARGV[#ARGV - 2]
  if id == '' then
    return nil, false
  end
  return id, ARGV[#ARGV - 3] == '1'
end

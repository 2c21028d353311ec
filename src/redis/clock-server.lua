-- Store clock: Redis server time in integer microseconds. Expiry is judged with this
-- clock only, never with the caller's.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- When this Redis process started, never earlier than it really did: after a restart that
-- lost every key, shards with no history wait one TTL from here. Redis counts uptime in
-- whole seconds from the second it started (unixtime - starttime), so it started before
-- the end of second (now_s - uptime_s): that instant, fixed for the life of the process,
-- is the latest it can have started. A moving estimate (now - uptime) would make every
-- recovery wait jump in whole seconds and overstate it by up to a second.
local function boot_us(now)
  local info = redis.call('INFO', 'server')
  local uptime_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  return (math.floor(now / 1000000) - uptime_s + 1) * 1000000
end

-- The store's lineage (see StoreLineage in lease/machine.ts): master_replid, which changes
-- on a promotion and on every restart, and whether this server's data continues another
-- server's (second_repl_offset is set on a promoted replica, -1 otherwise).
local function store_lineage()
  local info = redis.call('INFO', 'replication')
  local id = string.match(info, 'master_replid:(%w+)')
  local second = tonumber(string.match(info, 'second_repl_offset:(%-?%d+)'))
  return id, second ~= nil and second >= 0
end

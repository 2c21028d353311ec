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
-- Every lease script reads it, so it is read with plain searches, not patterns: a replid is
-- always 40 characters (CONFIG_RUN_ID_SIZE), and the offset is unset exactly when it starts
-- with '-' (byte 45). Measured in a renew script: 12.5-13.9 us a call with string.match,
-- 9.4-10.9 with these, 8.1-8.6 without reading INFO at all.
local function store_lineage()
  local info = redis.call('INFO', 'replication')
  local at = string.find(info, 'master_replid:', 1, true)
  if not at then return nil, false end
  local second = string.find(info, 'second_repl_offset:', at, true)
  return string.sub(info, at + 14, at + 53), second ~= nil and string.byte(info, second + 19) ~= 45
end

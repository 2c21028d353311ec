--! fragment
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
--
-- The caller keeps what the last lease script on its connection went by (src/store/redis/lineage.ts)
-- and passes it as the last four arguments: the Cluster node it was read on ('' off a
-- Cluster, '?' for a node not read yet), promoted ('1'/'0'), the replication id ('' for
-- none) and the store time it was last confirmed. It is taken without reading INFO only
-- when the shard records that same lineage (known), on that node, within LINEAGE_TRUST_US
-- of its confirmation; anything else reads INFO, so a reading that went stale is never
-- written over a newer one. Why that keeps the rule: lease scripts carry the flags line
-- that makes a replica refuse them, so each one that runs confirms this server was a
-- master then. A master's replication id changes only by a restart (the caller drops its
-- readings with the connection) or by a demotion and a promotion; in between, a script
-- would have been refused (the caller then has no confirmation within the window). A
-- promoted server can have missed a grant only if the server granting it held the shard
-- for one TTL (>= 1 s, LEASE_TTL_MIN_MS) after its own promotion, after this server's
-- demotion: no such span fits between two runs closer than LINEAGE_TRUST_US.
local LINEAGE_TRUST_US = 500000
local CONFIRMED = { '' }

-- What the caller learns with the reply (see reply): nothing (no lineage read), {''}
-- (its reading confirmed), or { id, promoted, node } read from INFO.
local lineage_seen = nil

-- INFO is read with plain searches, not patterns: a replid is always 40 characters
-- (CONFIG_RUN_ID_SIZE), and the offset is unset exactly when it starts with '-' (byte 45).
local function read_lineage()
  local info = redis.call('INFO', 'replication')
  local at = string.find(info, 'master_replid:', 1, true)
  if not at then return nil, false end
  local second = string.find(info, 'second_repl_offset:', at, true)
  return string.sub(info, at + 14, at + 53), second ~= nil and string.byte(info, second + 19) ~= 45
end

local function store_lineage(now, known)
  local n = #ARGV
  local node, id = ARGV[n - 3], ARGV[n - 1]
  local here = ''
  if node ~= nil and node ~= '' then here = redis.call('CLUSTER', 'MYID') end
  if id == known and id ~= nil and here == node and now - tonumber(ARGV[n]) < LINEAGE_TRUST_US then
    lineage_seen = CONFIRMED
    return id, ARGV[n - 2] == '1'
  end
  local read, promoted = read_lineage()
  if read then lineage_seen = { read, promoted and '1' or '0', here } end
  return read, promoted
end

--! fragment
-- Shared by every lease script; prepended to each at load time after the clock.
-- KEYS[1] is the shard's lease hash: holder, token, exp (expiry, store us), since (when
-- this lease began, store us), renewed ('1' once its holder renewed it), last (the
-- highest token ever minted for the shard; kept when the lease is released), key (the
-- lease's token, ':' and the SHA-256 of its fence key, '' for none; read by fence only), lineage
-- (the store lineage that last granted or renewed) and hold (store us: nothing granted,
-- renewed or fenced through before it).
local key = KEYS[1]

local function load_state()
  local f = redis.call('HMGET', key, 'holder', 'token', 'exp', 'since', 'last', 'renewed', 'lineage', 'hold')
  local lease = false
  if f[1] then
    lease = { holder = f[1], token = tonumber(f[2]), exp = tonumber(f[3]), since = tonumber(f[4]),
      renewed = f[6] == '1' }
  end
  return lease, tonumber(f[5]) or 0, f[7] or false, tonumber(f[8]) or 0
end

-- Whether the shard was written under another lineage than the store's now, or has no
-- record of one on a store whose data continues another's (lineageHold in machine.ts).
local function foreign_lineage(known, now)
  local id, promoted = store_lineage(now, known)
  if not id then return false, nil end
  return known ~= id and (known or promoted), id
end

-- The wait (ms, 0: none) a lineage change imposes before a grant or a renew, and the
-- store's lineage now (nil: none), read once per script. Noticing the change starts a
-- hold of one TTL, recorded in the shard's hash.
local function lineage_hold(known, hold, ttl, now)
  local foreign, id = foreign_lineage(known, now)
  if foreign then
    redis.call('HSET', key, 'lineage', id, 'hold', str(now + ttl * 1000))
    return ttl, id
  end
  return math.max(0, math.ceil((hold - now) / 1000)), id
end

-- A grant or a renew records the lineage it was made under: the HSET field and value to
-- add to its write, none when the hash already names that lineage.
local NO_FIELDS = {}
local function lineage_fields(id, known)
  if id and id ~= known then
    return { 'lineage', id }
  end
  return NO_FIELDS
end

-- A lease is dead from its expiry instant on.
local function live(lease, now)
  if lease and now < lease.exp then
    return lease
  end
  return false
end

-- Reply: {ok, reason, holder, token, ttl_ms, now, retry_after_ms, since}, then what the
-- script went by for the lineage (see store_lineage): nothing when it read none, '' when
-- the caller's reading served, or the id, promoted and node it read. Holder '' and token
-- 0 when there is no live lease (Lua arrays cannot hold nil).
local function reply(ok, reason, lease, now, retry_ms)
  local r
  if lease then
    r = { ok, reason, lease.holder, lease.token, math.floor((lease.exp - now) / 1000), now, 0, lease.since }
  else
    r = { ok, reason, '', 0, -1, now, retry_ms or 0, 0 }
  end
  local seen = lineage_seen
  if seen then
    for i = 1, #seen do r[8 + i] = seen[i] end
  end
  return r
end

-- Why agent presenting token is not the live holder, or false when it is.
local function mismatch(cur, agent, token)
  if not cur then return 'expired' end
  if cur.holder ~= agent then return 'held' end
  if cur.token ~= token then return 'stale_token' end
  return false
end

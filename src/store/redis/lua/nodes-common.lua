--! fragment
-- Shared by the node scripts; prepended to each at load time. ARGV[1] is the key prefix of
-- the node registry ("<namespace>:{nodes}:"): every key below shares the {nodes} hash tag,
-- so each script touches one slot and runs unchanged on Redis Cluster.
--   d:<3 hex>          hash uuid -> record, the bucket chosen by the SHA-1 of the uuid:
--                      evenly spread whatever the uuids look like, so every bucket stays a
--                      small listpack-encoded hash (about 70 bytes a node)
--   a:<3 hex>          sorted set (all scores 0, so ordered by uuid) of every node, by its
--                      first 3 hex digits: a listing in uuid order costs O(its page)
--   s:<shard>:<1 hex>  the same for the nodes of one shard
--   u:<3 hex>          the same for the unsharded pool
--   h:<host>           the same for the unsharded nodes whose instance is on <host> (lower-cased)
--   c                  hash place -> node count ('' = unsharded)
--   pv                 hash place -> version, changed when any node of that place changes,
--                      and '~pool' -> the pool's version, changed when the unsharded pool
--                      or an unsharded node's host changes. A version is the server's time
--                      in µs (at least the last one + 1): a field goes when its place
--                      empties, and a version never comes back, so a listing cached under
--                      one is never mistaken for a later one.
-- A record is "shard \31 name \31 conductor_group \31 instance_host [\31 host key]",
-- '' standing for null; the host key (lower-cased host) only when it differs from the host.
local P = ARGV[1]
local SEP = '\31'
local HEX = '0123456789abcdef'
local VERSIONS = P .. 'pv'
local POOL = '~pool'

local function data_key(uuid) return P .. 'd:' .. string.sub(redis.sha1hex(uuid), 1, 3) end

-- An ordered index: its buckets are `base` .. the first `len` hex digits of the uuid.
local function index(base, len) return { base = base, len = len } end
local ALL = index(P .. 'a:', 3)
local function place_index(shard)
  if shard == '' then return index(P .. 'u:', 3) end
  return index(P .. 's:' .. shard .. ':', 1)
end
local function host_index(hk) return index(P .. 'h:' .. hk, 0) end
local function bucket_of(idx, uuid) return idx.base .. string.sub(uuid, 1, idx.len) end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Mark `field` (a place, or POOL) changed, or forget it when its place is now empty.
local function changed(field, empty)
  if empty then
    redis.call('HDEL', VERSIONS, field)
    return
  end
  local last = tonumber(redis.call('HGET', VERSIONS, field)) or 0
  redis.call('HSET', VERSIONS, field, string.format('%.0f', math.max(last + 1, now_us())))
end

-- What decides where a record is indexed: its shard and its host key.
local function placement(record)
  local fields, from = {}, 1
  while true do
    local at = string.find(record, SEP, from, true)
    if not at then fields[#fields + 1] = string.sub(record, from); break end
    fields[#fields + 1] = string.sub(record, from, at - 1)
    from = at + 1
  end
  return fields[1], fields[5] or fields[4]
end

-- Where in nova's pool a node stands: '' sharded (outside it), 'u:' free, 'u:<host>' held.
local function pool_place(shard, hk)
  if shard ~= '' then return '' end
  return 'u:' .. hk
end

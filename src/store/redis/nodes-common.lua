-- Shared by the node scripts; prepended to each at load time. ARGV[1] is the key prefix of
-- the node registry ("<namespace>:{nodes}:"): every key below shares the {nodes} hash tag,
-- so each script touches one slot and runs unchanged on Redis Cluster.
--   d:<3 hex>          hash uuid -> record (nodes bucketed by uuid prefix: small hashes
--                      stay listpack-encoded, about 70 bytes a node)
--   s:<shard>:<1 hex>  sorted set (all scores 0, ordered by uuid): the nodes of a shard
--   u:<2 hex>          the same for the unsharded pool (larger, so more buckets)
--   h:<host>           unsharded nodes whose instance is on <host> (lower-cased)
--   counts             hash place -> node count ('' = unsharded)
--   pool-v             bumped when the unsharded pool or an unsharded node's host changes
-- A record is "shard \31 name \31 conductor_group \31 instance_host [\31 host key]",
-- '' standing for null; the host key (lower-cased host) only when it differs from the host.
local P = ARGV[1]
local SEP = '\31'
local HEX = '0123456789abcdef'

local function data_key(uuid) return P .. 'd:' .. string.sub(uuid, 1, 3) end
local function host_index(hk) return P .. 'h:' .. hk end

-- The buckets of a place, in uuid order, and the one a uuid falls in.
local function place_buckets(shard)
  local keys = {}
  if shard == '' then
    for i = 1, 16 do
      for j = 1, 16 do keys[#keys + 1] = P .. 'u:' .. string.sub(HEX, i, i) .. string.sub(HEX, j, j) end
    end
  else
    for i = 1, 16 do keys[#keys + 1] = P .. 's:' .. shard .. ':' .. string.sub(HEX, i, i) end
  end
  return keys
end
local function place_key(shard, uuid)
  if shard == '' then return P .. 'u:' .. string.sub(uuid, 1, 2) end
  return P .. 's:' .. shard .. ':' .. string.sub(uuid, 1, 1)
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

local function hex_value(c)
  return (string.find(HEX, c, 1, true) or 1) - 1
end

-- Where in nova's pool a node stands: '' sharded (outside it), 'u:' free, 'u:<host>' held.
local function pool_place(shard, hk)
  if shard ~= '' then return '' end
  return 'u:' .. hk
end

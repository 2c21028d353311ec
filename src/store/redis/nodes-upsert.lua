-- nodes-upsert(KEYS: data, place, counts; ARGV: members prefix, unsharded set, guard,
-- then triples uuid, shard ('' = unsharded), node JSON). All keys share the {nodes} hash
-- tag, members sets included, so the script touches one slot. Answers, per node, '~' when
-- it is new, else its old place ('' = unsharded). A node leaves its old place and enters
-- its new one in the same step: it is never in two places, nor in none.
-- The guard, when not '', is the node JSON the one node must still have stored (a
-- compare-and-set for a read-modify-write): else nothing is written and the answer is 0.
local data, place, counts = KEYS[1], KEYS[2], KEYS[3]
local prefix, unsharded, guard = ARGV[1], ARGV[2], ARGV[3]

-- Field by field, not byte by byte: a node stored by an older bridge may order its
-- fields differently.
local function same_node(a, b)
  for _, field in ipairs({ 'uuid', 'name', 'shard', 'conductor_group', 'instance_host' }) do
    if a[field] ~= b[field] then return false end
  end
  return true
end

if guard ~= '' then
  local stored = redis.call('HGET', data, ARGV[4])
  if not stored or not same_node(cjson.decode(stored), cjson.decode(guard)) then
    return 0
  end
end

local function members(shard)
  if shard == '' then return unsharded end
  return prefix .. shard
end

local created = {}
for i = 4, #ARGV, 3 do
  local uuid, shard, json = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', place, uuid)
  if old ~= shard then
    if old then
      redis.call('SREM', members(old), uuid)
      if redis.call('HINCRBY', counts, old, -1) <= 0 then
        redis.call('HDEL', counts, old)
      end
    end
    redis.call('SADD', members(shard), uuid)
    redis.call('HINCRBY', counts, shard, 1)
    redis.call('HSET', place, uuid, shard)
  end
  redis.call('HSET', data, uuid, json)
  created[#created + 1] = old or '~'
end
return created

-- nodes-upsert(KEYS: data, place, counts; ARGV: members prefix, unsharded set, then
-- triples uuid, shard ('' = unsharded), node JSON). All keys share the {nodes} hash tag,
-- members sets included, so the script touches one slot. Answers, per node, '~' when it
-- is new, else its old place ('' = unsharded). A node leaves its old place and enters its new one in the same step:
-- it is never in two places, nor in none.
local data, place, counts = KEYS[1], KEYS[2], KEYS[3]
local prefix, unsharded = ARGV[1], ARGV[2]

local function members(shard)
  if shard == '' then return unsharded end
  return prefix .. shard
end

local created = {}
for i = 3, #ARGV, 3 do
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

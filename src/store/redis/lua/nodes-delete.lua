--! keys 2
--! include nodes-common
-- nodes-delete(KEYS: counts, versions; ARGV: prefix, uuid): 1 when the node was there, 0
-- otherwise. It leaves its place and every index in the same step.
local counts = KEYS[1]
local uuid = ARGV[2]
local dk = data_key(uuid)
local old = redis.call('HGET', dk, uuid)
if not old then return 0 end
local shard, hk = placement(old)
redis.call('ZREM', bucket_of(ALL, uuid), uuid)
redis.call('ZREM', bucket_of(place_index(shard), uuid), uuid)
if redis.call('HINCRBY', counts, shard, -1) <= 0 then redis.call('HDEL', counts, shard) end
local was = pool_place(shard, hk)
if was ~= '' then
  if string.len(was) > 2 then redis.call('ZREM', host_index(string.sub(was, 3)).base, uuid) end
  changed(POOL, not redis.call('HGET', counts, ''))
end
changed(shard, not redis.call('HGET', counts, shard))
redis.call('HDEL', dk, uuid)
return 1

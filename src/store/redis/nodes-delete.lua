-- nodes-delete(KEYS: counts, pool-v; ARGV: prefix, uuid): 1 when the node was there, 0
-- otherwise. It leaves its place and every index in the same step.
local counts, pool_v = KEYS[1], KEYS[2]
local uuid = ARGV[2]
local dk = data_key(uuid)
local old = redis.call('HGET', dk, uuid)
if not old then return 0 end
local shard, hk = placement(old)
redis.call('ZREM', place_key(shard, uuid), uuid)
if redis.call('HINCRBY', counts, shard, -1) <= 0 then redis.call('HDEL', counts, shard) end
local was = pool_place(shard, hk)
if was ~= '' then
  if string.len(was) > 2 then redis.call('ZREM', host_index(string.sub(was, 3)), uuid) end
  redis.call('INCR', pool_v)
end
redis.call('HDEL', dk, uuid)
return 1

-- nodes-delete(KEYS: data, place, counts; ARGV: members prefix, unsharded set, uuid):
-- 1 when the node was there, 0 otherwise.
local data, place, counts = KEYS[1], KEYS[2], KEYS[3]
local prefix, unsharded, uuid = ARGV[1], ARGV[2], ARGV[3]
local old = redis.call('HGET', place, uuid)
if not old then
  return 0
end
local set = unsharded
if old ~= '' then set = prefix .. old end
redis.call('SREM', set, uuid)
if redis.call('HINCRBY', counts, old, -1) <= 0 then
  redis.call('HDEL', counts, old)
end
redis.call('HDEL', place, uuid)
redis.call('HDEL', data, uuid)
return 1

--! keys 2
--! include nodes-common
-- nodes-upsert(KEYS: counts, versions; ARGV: prefix, guard, mark, then pairs uuid, record):
-- insert or replace each node, moving it between places and indexes in the same step
-- (it is never in two places, nor in none). Answers, per node, '~' when it is new, else
-- its old shard ('' = unsharded). The guard, when not '', is the record the one node
-- must still have (a compare-and-set for a read-modify-write): else nothing is written
-- and the answer is 0. `mark` is left as the registry's mark where it has none (a new
-- registry, or one that lost its data: see NodeBackend.mark).
local counts = KEYS[1]
local guard = ARGV[2]
if guard ~= '' and redis.call('HGET', data_key(ARGV[4]), ARGV[4]) ~= guard then
  return 0
end
redis.call('SET', P .. 'mark', ARGV[3], 'NX')

local previous, pool_changed, touched = {}, false, {}
for i = 4, #ARGV, 2 do
  local uuid, record = ARGV[i], ARGV[i + 1]
  local dk = data_key(uuid)
  local old = redis.call('HGET', dk, uuid)
  local shard, hk = placement(record)
  local oshard, ohk = nil, nil
  if old then oshard, ohk = placement(old) else redis.call('ZADD', bucket_of(ALL, uuid), 0, uuid) end
  if oshard ~= shard then
    if old then
      redis.call('ZREM', bucket_of(place_index(oshard), uuid), uuid)
      if redis.call('HINCRBY', counts, oshard, -1) <= 0 then redis.call('HDEL', counts, oshard) end
    end
    redis.call('ZADD', bucket_of(place_index(shard), uuid), 0, uuid)
    redis.call('HINCRBY', counts, shard, 1)
  end
  local was = old and pool_place(oshard, ohk) or ''
  local now = pool_place(shard, hk)
  if was ~= now then
    pool_changed = true
    if string.len(was) > 2 then redis.call('ZREM', host_index(string.sub(was, 3)).base, uuid) end
    if string.len(now) > 2 then redis.call('ZADD', host_index(string.sub(now, 3)).base, 0, uuid) end
  end
  if old ~= record then
    touched[shard] = true
    if old then touched[oshard] = true end
  end
  redis.call('HSET', dk, uuid, record)
  previous[#previous + 1] = old and oshard or '~'
end
for place in pairs(touched) do changed(place, not redis.call('HGET', counts, place)) end
if pool_changed then changed(POOL, not redis.call('HGET', counts, '')) end
return previous

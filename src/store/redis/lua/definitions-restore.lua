--! keys 5
-- definitions-restore(KEYS[1]=records hash, KEYS[2]=version, KEYS[3]=changes sorted set,
-- KEYS[4]=mark, KEYS[5]=key -> name hash; ARGV: a mark for a store without one, then name,
-- version, record ('' for removed) per entry of a copy a bridge kept): merge the copy in
-- one step. An entry is taken only where the store has none of that shard or an older one,
-- so several bridges may each send theirs, in any order: the newest of each shard stays,
-- never an older one over it, and a removal newer than a copy's record keeps the shard
-- removed. A record whose name equals another live one's but for case is not taken (the
-- store's spelling stays: one shard to nova and Ironic's database; see definitions-write).
-- Answers how many entries were taken.
redis.call('SET', KEYS[4], ARGV[1], 'NX')
if redis.call('EXISTS', KEYS[5]) == 0 then
  for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
    redis.call('HSET', KEYS[5], string.lower(name), name)
  end
end
local top = tonumber(redis.call('GET', KEYS[2])) or 0
local restored = 0
for i = 2, #ARGV, 3 do
  local name, v, record = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local held = tonumber(redis.call('ZSCORE', KEYS[3], name))
  -- A record with no entry in the changes was written by an older bridge: version 0.
  if held == nil and redis.call('HEXISTS', KEYS[1], name) == 1 then
    held = 0
  end
  local key = string.lower(name)
  local twin = redis.call('HGET', KEYS[5], key)
  local shadowed = record ~= '' and twin and twin ~= name and redis.call('HEXISTS', KEYS[1], twin) == 1
  if (held == nil or held < v) and not shadowed then
    if record == '' then
      redis.call('HDEL', KEYS[1], name)
      if twin == name then
        redis.call('HDEL', KEYS[5], key)
      end
    else
      redis.call('HSET', KEYS[1], name, record)
      redis.call('HSET', KEYS[5], key, name)
    end
    redis.call('ZADD', KEYS[3], ARGV[i + 1], name)
    restored = restored + 1
    if v > top then
      top = v
    end
  end
end
redis.call('SET', KEYS[2], string.format('%.0f', top))
return restored

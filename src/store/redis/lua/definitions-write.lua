--! keys 5
-- definitions-write(KEYS[1]=records hash, KEYS[2]=version, KEYS[3]=changes sorted set,
-- KEYS[4]=mark, KEYS[5]=key -> name hash; ARGV: shard name, record or '' to remove, the
-- mark for a store without one, the name's key (lower-cased, as nova and Ironic's database
-- compare shard names)):
-- store or remove one shard definition, stamp its entry in the changes with a new version
-- and move the version, in one step, so a bridge that reads what changed since a version
-- never misses a write. A removal keeps the shard's entry (without a record): a copy of the
-- definitions taken before it can then never bring the shard back (definitions-restore).
-- The version is the server's time in µs (at least the last one + 1), as the node
-- registry's place versions are: a Redis that restarted empty never hands out a version a
-- bridge saw before, and its writes rank above every copy taken before the loss.
-- A record whose name equals another live one's but for case is refused, nothing written:
-- two bridges defining `rack-x` and `RACK-X` at once get one each, never both.
-- Answers {existed (0/1), new version}, or {-1, the other name}.
if redis.call('EXISTS', KEYS[5]) == 0 then
  -- Records written before the key hash (or none, or restored after a loss): their keys,
  -- once. Shard names are ASCII, so Lua's lower-casing is the bridge's.
  for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
    redis.call('HSET', KEYS[5], string.lower(name), name)
  end
end
local existed = redis.call('HEXISTS', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  if redis.call('HGET', KEYS[5], ARGV[4]) == ARGV[1] then
    redis.call('HDEL', KEYS[5], ARGV[4])
  end
else
  local twin = redis.call('HGET', KEYS[5], ARGV[4])
  if twin and twin ~= ARGV[1] and redis.call('HEXISTS', KEYS[1], twin) == 1 then
    return { -1, twin }
  end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HSET', KEYS[5], ARGV[4], ARGV[1])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local version = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, now)
-- As text: Redis would give a Lua number to a command with 14 digits (%.14g).
local text = string.format('%.0f', version)
redis.call('SET', KEYS[2], text)
redis.call('ZADD', KEYS[3], text, ARGV[1])
redis.call('SET', KEYS[4], ARGV[3], 'NX')
return { existed, version }

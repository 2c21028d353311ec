--! keys 4
-- definitions-write(KEYS[1]=records hash, KEYS[2]=version, KEYS[3]=changes sorted set,
-- KEYS[4]=mark; ARGV: shard name, record or '' to remove, the mark for a store without one):
-- store or remove one shard definition, stamp its entry in the changes with a new version
-- and move the version, in one step, so a bridge that reads what changed since a version
-- never misses a write. A removal keeps the shard's entry (without a record): a copy of the
-- definitions taken before it can then never bring the shard back (definitions-restore).
-- The version is the server's time in µs (at least the last one + 1), as the node
-- registry's place versions are: a Redis that restarted empty never hands out a version a
-- bridge saw before, and its writes rank above every copy taken before the loss.
-- Answers {existed (0/1), new version}.
local existed = redis.call('HEXISTS', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
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

--! keys 2
-- definitions-write(KEYS[1]=records hash, KEYS[2]=version; ARGV: shard name, record or '' to remove):
-- store or remove one shard definition and move the version, in one step, so a bridge that
-- reads the version never misses a write. The version is the server's time in µs (at least
-- the last one + 1), as the node registry's place versions are: a Redis that restarted
-- empty never hands out a version a bridge saw before, for other definitions.
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
redis.call('SET', KEYS[2], string.format('%.0f', version))
return { existed, version }

-- definitions-write(KEYS[1]=records hash, KEYS[2]=version; ARGV: shard name, record or '' to remove):
-- store or remove one shard definition and bump the version, in one step, so a bridge that
-- reads the version never misses a write. Answers {existed (0/1), new version}.
local existed = redis.call('HEXISTS', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return { existed, redis.call('INCR', KEYS[2]) }

-- heartbeat(KEYS[1]=last-seen sorted set, KEYS[2]=served-shards hash;
--           ARGV: agent, shards it serves comma-joined ('' = none, the legacy pool)):
-- record last-seen in store ms and what the agent serves, in one step.
local now = clock_us()
local ms = math.floor(now / 1000)
redis.call('ZADD', KEYS[1], str(ms), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return ms

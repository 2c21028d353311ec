-- heartbeat(KEYS[1]=agents sorted set; ARGV: agent): record last-seen in store ms.
local now = clock_us()
local ms = math.floor(now / 1000)
redis.call('ZADD', KEYS[1], str(ms), ARGV[1])
return ms

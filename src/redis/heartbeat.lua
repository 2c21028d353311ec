--! keys 3
--! include clock numbers
-- heartbeat(KEYS[1]=last-seen sorted set, KEYS[2]=served-shards hash, KEYS[3]=host key ->
--           agent hash; ARGV: agent, shards it serves comma-joined ('' = none, the legacy
--           pool), the agent's host key (nova's, lower-cased)):
-- record last-seen in store ms and what the agent serves, in one step; {ms, ''}. Refused,
-- nothing written, when another agent with a record has the same host key: {-1, that agent}.
local twin = redis.call('HGET', KEYS[3], ARGV[3])
if twin and twin ~= ARGV[1] and redis.call('ZSCORE', KEYS[1], twin) then
  return { -1, twin }
end
local now = clock_us()
local ms = math.floor(now / 1000)
redis.call('ZADD', KEYS[1], str(ms), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[1])
return { ms, '' }

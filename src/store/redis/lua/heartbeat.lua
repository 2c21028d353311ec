--! keys 4
--! include clock numbers
-- heartbeat(KEYS[1]=last-seen sorted set, KEYS[2]=served-shards hash, KEYS[3]=host key ->
--           agent hash, KEYS[4]=the agent's instances hash (instance -> "ms|shards");
--           ARGV: agent, shards this instance serves comma-joined ('' = none, the legacy
--           pool), the agent's host key (nova's, lower-cased), the instance ('' for a sender
--           that names none), how long an instance's shards count after its heartbeat (ms)):
-- record last-seen in store ms and what the agent serves, in one step: every shard its
-- instances heard within that time declared in their last heartbeats (sorted), so two
-- processes of one agent id add up rather than overwrite each other; {ms, the shards}.
-- Refused, nothing written, when another agent with a record has the same host key:
-- {-1, that agent}.
local twin = redis.call('HGET', KEYS[3], ARGV[3])
if twin and twin ~= ARGV[1] and redis.call('ZSCORE', KEYS[1], twin) then
  return { -1, twin }
end
local now = clock_us()
local ms = math.floor(now / 1000)
local window = tonumber(ARGV[5])
redis.call('HSET', KEYS[4], ARGV[4], str(ms) .. '|' .. ARGV[2])
local declared, served = {}, {}
local instances = redis.call('HGETALL', KEYS[4])
for i = 1, #instances, 2 do
  local at, shards = string.match(instances[i + 1], '^(%d+)|(.*)$')
  if tonumber(at) + window < ms then
    redis.call('HDEL', KEYS[4], instances[i])
  else
    for shard in string.gmatch(shards, '[^,]+') do
      if not declared[shard] then
        declared[shard] = true
        served[#served + 1] = shard
      end
    end
  end
end
-- Shard names are ASCII: byte order, as the bridge sorts them.
table.sort(served)
local serves = table.concat(served, ',')
-- The instances go with the agent's last heartbeat, should nobody forget the agent.
redis.call('PEXPIRE', KEYS[4], window)
redis.call('ZADD', KEYS[1], str(ms), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], serves)
redis.call('HSET', KEYS[3], ARGV[3], ARGV[1])
return { ms, serves }

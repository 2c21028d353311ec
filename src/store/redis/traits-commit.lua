-- traits-commit(KEYS[1]=the node's traits key, KEYS[2]=its shard's feed stream;
-- ARGV: expected generation, record JSON, new generation, feed entry JSON or '', the
-- feed's approximate length bound).
-- Store the record only if the stored generation is still the expected one, and in the
-- same step append the entry to the shard's feed. 1 when stored, 0 when someone
-- committed in between.
local stored = redis.call('HGET', KEYS[1], 'generation')
local generation = tonumber(stored) or 0
if generation ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'generation', ARGV[3], 'record', ARGV[2])
if ARGV[4] ~= '' then
  -- Bounded (FEED_MAX_ENTRIES in redis-store.ts): an agent away longer needs a resync.
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[4])
end
return 1

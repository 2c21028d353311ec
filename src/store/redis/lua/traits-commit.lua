--! keys 7
--! include ironic-enqueue
-- traits-commit(KEYS[1]=the node's trait bucket, KEYS[2]=its shard's feed stream or the
-- stand-in, KEYS[3]=the delivery's key or the stand-in, KEYS[4..7]=the node's Ironic
-- queue partition, its folded records, their start times and the queue's counters, or
-- the stand-in four times; ARGV: uuid, expected generation, the new record
-- ("<generation>\t<JSON>"), feed entry JSON or '', the feed's approximate length bound,
-- the delivery's answer or '', its TTL in s, the changes for Ironic ("+A -B") or '',
-- the queue partition's bound in entries).
-- Store the record only if the stored generation is still the expected one, and in the
-- same step append the entry to the shard's feed, remember the delivery's answer and
-- queue the changes for Ironic: a bridge that dies after the commit cannot lose them.
-- 1 when stored, 0 when someone committed in between.
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local generation = 0
if stored then generation = tonumber(string.match(stored, '^(%d+)\t')) end
if generation ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] ~= '' then
  -- Bounded (FEED_MAX_ENTRIES in traits/redis.ts): an agent away longer needs a resync.
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'e', ARGV[4])
end
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[7])
end
if ARGV[8] ~= '' then
  ironic_enqueue(KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[1], ARGV[8], tonumber(ARGV[2]) + 1, tonumber(ARGV[9]))
end
return 1

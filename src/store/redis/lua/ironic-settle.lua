--! keys 4
-- ironic-settle(KEYS[1]=a partition's queue stream or its folded records, KEYS[2]=the
-- folded records' start times, KEYS[3]=the queue's counters, KEYS[4]=the undeliverable
-- stream; ARGV: 'queued' or 'merged', the entry id or the node, the record as read (for
-- 'merged'), how many changes, 'delivered' or 'given_up', the undeliverable record JSON
-- or '', how many undeliverable records to keep).
-- Take a delivered (or given up) change off the queue, once: a second settle of the same
-- change (another owner delivered it too: at least once) finds it gone and counts
-- nothing. A folded record is taken only if it is still what was delivered; changes
-- folded in meanwhile keep it queued. Answers {1 settled or 0, store ms now}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'queued' then
  if redis.call('XDEL', KEYS[1], ARGV[2]) == 0 then
    return { 0, now }
  end
else
  if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then
    return { 0, now }
  end
  redis.call('HDEL', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
redis.call('HINCRBY', KEYS[3], 'pending', -tonumber(ARGV[4]))
redis.call('HINCRBY', KEYS[3], ARGV[5], 1)
if ARGV[6] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'r', ARGV[6])
end
return { 1, now }

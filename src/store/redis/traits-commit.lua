-- traits-commit(KEYS[1]=the node's traits key; ARGV: expected generation, record JSON,
-- new generation): store the record only if the stored generation is still the
-- expected one. 1 when stored, 0 when someone committed in between.
local stored = redis.call('HGET', KEYS[1], 'generation')
local generation = tonumber(stored) or 0
if generation ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'generation', ARGV[3], 'record', ARGV[2])
return 1

#!lua
--! keys 1
--! include clock numbers lease-common
-- release(KEYS[1]=lease hash; ARGV: agent, token)
local agent, token = ARGV[1], tonumber(ARGV[2])
local now = clock_us()
local cur = live(load_state(), now)
local why = mismatch(cur, agent, token)
if why == 'expired' then
  -- Nothing live to give up: releasing is idempotent.
  return reply(1, '', false, now)
end
if why then
  return reply(0, why, cur, now)
end
-- Keep 'last' so the next token still climbs above this one.
redis.call('HDEL', key, 'holder', 'token', 'exp', 'since', 'renewed', 'key')
return reply(1, '', false, now)

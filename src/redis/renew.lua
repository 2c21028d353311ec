-- renew(KEYS[1]=lease hash; ARGV: agent, token, ttl_ms)
local agent, token, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = clock_us()
local cur = live(load_state(), now)
local why = mismatch(cur, agent, token)
if why then
  -- An expired lease is never revived: a new lease must carry a new token.
  return reply(0, why, cur, now)
end
cur.exp = now + ttl * 1000
redis.call('HSET', key, 'exp', str(cur.exp), 'renewed', '1')
return reply(1, '', cur, now)

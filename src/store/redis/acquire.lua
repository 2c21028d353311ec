-- acquire(KEYS[1]=lease hash; ARGV: agent, ttl_ms)
local agent, ttl = ARGV[1], tonumber(ARGV[2])
local now = clock_us()
local lease, last = load_state()
local cur = live(lease, now)
local exp = now + ttl * 1000
if not cur then
  -- A new lease mints a token above every earlier one and at least the clock, so tokens
  -- keep increasing even after a restart that lost this key.
  local token = math.max(last + 1, now)
  redis.call('HSET', key, 'holder', agent, 'token', str(token), 'exp', str(exp),
    'last', str(math.max(last, token)))
  return reply(1, '', { holder = agent, token = token, exp = exp }, now, 1)
end
if cur.holder == agent then
  -- Re-acquiring one's own live lease extends it and keeps the token.
  redis.call('HSET', key, 'exp', str(exp))
  cur.exp = exp
  return reply(1, '', cur, now, 0)
end
return reply(0, 'held', cur, now, 0)

#!lua
--! keys 1
--! include clock numbers lease-common
-- acquire(KEYS[1]=lease hash; ARGV: agent, ttl_ms, key digest ('' for none))
local agent, ttl, digest = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = clock_us()
local lease, last, known, hold = load_state()
local held_ms, lineage = lineage_hold(known, hold, ttl, now)
if held_ms > 0 then
  return reply(0, 'recovering', false, now, held_ms)
end
if last == 0 then
  -- No history of this shard: if Redis started less than one TTL ago it may have lost a
  -- lease whose holder is still acting; wait that out (see recoveryWaitMs).
  local wait = math.ceil((boot_us(now) + ttl * 1000 - now) / 1000)
  if wait > 0 then
    return reply(0, 'recovering', false, now, wait)
  end
end
local cur = live(lease, now)
-- The holder's own id gets a new lease only over one it renewed (proof it heard the
-- grant): an agent that can send but not hear must not be granted lease after lease.
if cur and (cur.holder ~= agent or not cur.renewed) then
  return reply(0, 'held', cur, now)
end
-- Every other acquire starts a new lease with a new token, also for the live holder's own
-- id (a restarted process must fence out its older incarnation). The token is above every
-- earlier one and at least the clock, so tokens keep increasing even after a restart
-- that lost this key.
-- The key's digest is kept with its token: a lease granted by a script that knows no key
-- (an older bridge on the same store) leaves the field of the lease before it, which then
-- names that lease's token and passes no fence of this one.
local token = math.max(last + 1, now)
local granted = { holder = agent, token = token, exp = now + ttl * 1000, since = now }
redis.call('HSET', key, 'holder', agent, 'token', str(token), 'exp', str(granted.exp), 'since', str(now),
  'last', str(token), 'renewed', '0', 'key', str(token) .. ':' .. digest, unpack(lineage_fields(lineage, known)))
return reply(1, '', granted, now)

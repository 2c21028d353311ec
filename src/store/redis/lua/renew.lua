#!lua
--! keys 1
--! include clock numbers lease-common
-- renew(KEYS[1]=lease hash; ARGV: agent, token, ttl_ms)
local agent, token, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = clock_us()
local lease, _, known, hold = load_state()
-- Under a lineage hold the holder is told no (see lineageHold in machine.ts).
local held_ms, lineage = lineage_hold(known, hold, ttl, now)
if held_ms > 0 then
  return reply(0, 'recovering', false, now, held_ms)
end
local cur = live(lease, now)
local why = mismatch(cur, agent, token)
if why then
  -- An expired lease is never revived: a new lease must carry a new token.
  return reply(0, why, cur, now)
end
cur.exp = now + ttl * 1000
redis.call('HSET', key, 'exp', str(cur.exp), 'renewed', '1', unpack(lineage_fields(lineage, known)))
return reply(1, '', cur, now)

#!lua
--! keys 1
--! include clock numbers lease-common
-- fence(KEYS[1]=lease hash; ARGV: token, key digest ('' for none)): may a write under this
-- token (and the lease's fence key, when given) happen now?
local token, digest = tonumber(ARGV[1]), ARGV[2]
local now = clock_us()
local lease, _, known, hold = load_state()
local cur = live(lease, now)
-- A fence starts no hold, but passes nothing under one, nor under a foreign lineage.
if foreign_lineage(known, now) or now < hold then
  return reply(0, 'recovering', cur, now)
end
if not cur then
  return reply(0, 'expired', cur, now)
end
-- A wrong key is told as a wrong token: either way the caller is not the live lease.
if cur.token ~= token or (digest ~= '' and redis.call('HGET', key, 'key') ~= str(token) .. ':' .. digest) then
  return reply(0, 'stale_token', cur, now)
end
return reply(1, '', cur, now)

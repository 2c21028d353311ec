#!lua
-- The least a renew under the lineage rule asks of Redis, for `make bench lease` to measure
-- beside the shipped renew (src/store/redis/lua/renew.lua): the store's clock, one read of the
-- fields a renew decides by, the caller's kept lineage compared with the shard's, one
-- write of the new expiry, and the reply the Store decodes. Nothing is defined before it
-- runs (no shared prelude: Redis 7's EVAL makes every function of a script anew on every
-- call), only the fields a renew needs are read, and `renewed` is written only once.
-- Not a lease service: it has no slow path (a reading the shard does not confirm is an
-- error here, where the shipped script reads INFO), so the bench cannot measure it by
-- mistake on a path the renews never take.
--
-- KEYS[1]: the lease hash. ARGV: agent, token, ttl_ms, node, promoted, id, confirmed_us
-- (the shipped renew's arguments).
local key = KEYS[1]
local agent, token, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = redis.call('HMGET', key, 'holder', 'token', 'exp', 'since', 'renewed', 'lineage', 'hold')
if not (ARGV[6] == f[6] and ARGV[4] == '' and now - tonumber(ARGV[7]) < 500000) then
  return redis.error_reply('least-renew: the kept lineage is not confirmed')
end
if now < (tonumber(f[7]) or 0) then
  return { 0, 'recovering', '', 0, -1, now, math.ceil((tonumber(f[7]) - now) / 1000), 0, '' }
end
if not f[1] or now >= tonumber(f[3]) then
  return { 0, 'expired', '', 0, -1, now, 0, 0, '' }
end
if f[1] ~= agent or tonumber(f[2]) ~= token then
  return { 0, f[1] ~= agent and 'held' or 'stale_token', f[1], tonumber(f[2]), -1, now, 0, 0, '' }
end
local exp = string.format('%.0f', now + ttl * 1000)
if f[5] == '1' then
  redis.call('HSET', key, 'exp', exp)
else
  redis.call('HSET', key, 'exp', exp, 'renewed', '1')
end
return { 1, '', agent, token, ttl, now, 0, tonumber(f[4]), '' }

-- fence(KEYS[1]=lease hash; ARGV: token): may a write under this token happen now?
local token = tonumber(ARGV[1])
local now = clock_us()
local cur = live(load_state(), now)
if not cur then
  return reply(0, 'expired', cur, now)
end
if cur.token ~= token then
  return reply(0, 'stale_token', cur, now)
end
return reply(1, '', cur, now)

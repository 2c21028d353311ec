--! keys 2
-- feed-ack(KEYS[1]=the shard's feed cursor, KEYS[2]=the shard's feed stream; ARGV: entry
-- id "<ms>-<seq>"): move the cursor forward to the id, never back. Answers the cursor; an
-- id at or behind it leaves it. An id past the cursor must name an entry of the feed:
-- else nil and nothing moves (a cursor moved past entries never delivered would hide
-- every later change from the active agent).
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local current = redis.call('GET', KEYS[1])
if current then
  local cm, cs = parse(current)
  local nm, ns = parse(ARGV[1])
  if nm < cm or (nm == cm and ns <= cs) then
    return current
  end
end
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then
  return false
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]

-- feed-ack(KEYS[1]=the shard's feed cursor; ARGV: entry id "<ms>-<seq>"): move the
-- cursor forward to the id, never back. Answers the cursor.
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
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]

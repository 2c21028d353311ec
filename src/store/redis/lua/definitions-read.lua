--! keys 4
-- definitions-read(KEYS[1]=records hash, KEYS[2]=version, KEYS[3]=changes sorted set,
-- KEYS[4]=mark; ARGV: the mark ('' none) and version the reader saw last): what changed
-- since, in one step, writing nothing. A mark other than the reader's (a store back empty
-- has none until its next write), or a version below the one it saw (a failover to a
-- replica that missed writes), answers every entry; so does a version no entry of the
-- changes carries: a write of an older bridge, which keeps none.
-- Answers {version, mark ('' none), whole (0/1), then name, version, record ('' removed) per entry}.
local mark = redis.call('GET', KEYS[4]) or ''
local version = tonumber(redis.call('GET', KEYS[2])) or 0
local seen = tonumber(ARGV[2])
if mark == ARGV[1] and version == seen then
  return { string.format('%.0f', version), mark, 0 }
end
local whole = mark ~= ARGV[1] or version < seen
if not whole then
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  whole = #last == 0 or tonumber(last[2]) < version
end
local out = { string.format('%.0f', version), mark, whole and 1 or 0 }
if whole then
  local versions = {}
  local scored = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  for i = 1, #scored, 2 do
    versions[scored[i]] = scored[i + 1]
  end
  local records = redis.call('HGETALL', KEYS[1])
  for i = 1, #records, 2 do
    -- A record with no entry in the changes was written by an older bridge: version 0.
    out[#out + 1] = records[i]
    out[#out + 1] = versions[records[i]] or '0'
    out[#out + 1] = records[i + 1]
    versions[records[i]] = nil
  end
  for name, v in pairs(versions) do
    out[#out + 1] = name
    out[#out + 1] = v
    out[#out + 1] = ''
  end
  return out
end
local scored = redis.call('ZRANGE', KEYS[3], '(' .. ARGV[2], '+inf', 'BYSCORE', 'WITHSCORES')
for i = 1, #scored, 2 do
  out[#out + 1] = scored[i]
  out[#out + 1] = scored[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[1], scored[i]) or ''
end
return out

--! keys 2
--! include clock numbers
-- agents(KEYS[1]=last-seen sorted set, KEYS[2]=served-shards hash):
-- {now_ms, agent1, seen1, serves1, agent2, seen2, serves2, ...}
local now_ms = math.floor(clock_us() / 1000)
local out = { now_ms }
local seen = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  out[#out + 1] = seen[i]
  out[#out + 1] = tonumber(seen[i + 1])
  out[#out + 1] = redis.call('HGET', KEYS[2], seen[i]) or ''
end
return out

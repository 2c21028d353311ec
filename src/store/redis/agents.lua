-- agents(KEYS[1]=agents sorted set): {now_ms, agent1, seen1, agent2, seen2, ...}
local now_ms = math.floor(clock_us() / 1000)
local out = { now_ms }
local seen = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  out[#out + 1] = seen[i]
  out[#out + 1] = tonumber(seen[i + 1])
end
return out

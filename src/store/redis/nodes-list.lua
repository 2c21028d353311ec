-- nodes-list(KEYS: counts; ARGV: prefix, mode, marker ('' = from the start), budget,
-- then the mode's arguments): one page of nodes in uuid order after the marker, examining
-- at most about `budget` entries so the script never holds Redis for long. Answers
-- {next ('' = no more), uuid1, record1, uuid2, record2, ...}; a page may be short, even
-- empty, with next set.
--   places SHARD...  the nodes of these shards ('' = the unsharded pool); the caller
--                    passes each place's share of the budget
--   instance HOSTKEY unsharded nodes whose instance is on that (lower-cased) host
--   free             unsharded nodes without an instance: what nova's ring places
--   all | sharded    every node / every node with a shard, walking the data buckets
--   get UUID...      these nodes, in the order given ('' for one that is not there)
local mode, marker, budget = ARGV[2], ARGV[3], tonumber(ARGV[4])
local from = '-'
if marker ~= '' then from = '(' .. marker end

local function finish(next_marker, uuids, records)
  local out = { next_marker }
  for i, uuid in ipairs(uuids) do
    out[#out + 1] = uuid
    out[#out + 1] = records[i] or redis.call('HGET', data_key(uuid), uuid)
  end
  return out
end

-- Append to `out` up to `n` members of the sorted-set buckets `keys` after the marker,
-- starting at bucket `first`; answers whether every bucket was read to its end.
local function buckets_after(keys, first, n, out)
  for b = first, #keys do
    local got = redis.call('ZRANGE', keys[b], from, '+', 'BYLEX', 'LIMIT', 0, n)
    for _, uuid in ipairs(got) do out[#out + 1] = uuid end
    n = n - #got
    -- Full: this bucket, or a later one, may hold more.
    if n <= 0 then return false end
  end
  return true
end

-- The bucket of a place the marker falls in (1-based; see place_buckets).
local function first_bucket(shard)
  if marker == '' then return 1 end
  local high = hex_value(string.sub(marker, 1, 1))
  if shard ~= '' then return high + 1 end
  return high * 16 + hex_value(string.sub(marker, 2, 2)) + 1
end

-- The data bucket with 0-based number i (0 .. 4095): three hex digits.
local function data_prefix(i)
  local a, b, c = math.floor(i / 256), math.floor(i / 16) % 16, i % 16
  return string.sub(HEX, a + 1, a + 1) .. string.sub(HEX, b + 1, b + 1) .. string.sub(HEX, c + 1, c + 1)
end

if mode == 'get' then
  local out = { '' }
  for i = 5, #ARGV do
    out[#out + 1] = ARGV[i]
    out[#out + 1] = redis.call('HGET', data_key(ARGV[i]), ARGV[i]) or ''
  end
  return out
elseif mode == 'places' then
  local merged, more = {}, false
  for i = 5, #ARGV do
    if not buckets_after(place_buckets(ARGV[i]), first_bucket(ARGV[i]), budget, merged) then more = true end
  end
  table.sort(merged)
  if #merged > budget then more = true end
  local uuids = {}
  for i = 1, math.min(#merged, budget) do uuids[i] = merged[i] end
  return finish((more and uuids[#uuids]) or '', uuids, {})
elseif mode == 'instance' then
  local uuids = redis.call('ZRANGE', host_index(ARGV[5]), from, '+', 'BYLEX', 'LIMIT', 0, budget + 1)
  local more = #uuids > budget
  if more then uuids[#uuids] = nil end
  return finish((more and uuids[#uuids]) or '', uuids, {})
elseif mode == 'free' then
  local seen, uuids, records = {}, {}, {}
  local more = not buckets_after(place_buckets(''), first_bucket(''), budget, seen)
  for _, uuid in ipairs(seen) do
    local record = redis.call('HGET', data_key(uuid), uuid)
    local _, hk = placement(record)
    if hk == '' then
      uuids[#uuids + 1] = uuid
      records[#records + 1] = record
    end
  end
  -- The page ends at the last entry examined, listed or not.
  return finish((more and seen[#seen]) or '', uuids, records)
end

-- all | sharded: the data buckets d:000 .. d:fff in order, whole buckets, at most 256 a call.
local start = 0
if marker ~= '' then
  start = hex_value(string.sub(marker, 1, 1)) * 256 + hex_value(string.sub(marker, 2, 2)) * 16
    + hex_value(string.sub(marker, 3, 3))
end
local uuids, records = {}, {}
local examined, i = 0, start
while i < 4096 and examined < budget and i < start + 256 do
  local flat = redis.call('HGETALL', P .. 'd:' .. data_prefix(i))
  local bucket = {}
  for j = 1, #flat, 2 do
    if marker == '' or flat[j] > marker then bucket[#bucket + 1] = { flat[j], flat[j + 1] } end
  end
  table.sort(bucket, function(x, y) return x[1] < y[1] end)
  for _, entry in ipairs(bucket) do
    examined = examined + 1
    if mode == 'all' or placement(entry[2]) ~= '' then
      uuids[#uuids + 1] = entry[1]
      records[#records + 1] = entry[2]
    end
  end
  i = i + 1
end
if i >= 4096 then return finish('', uuids, records) end
-- Stopped early: go on after the last bucket read, from its highest possible uuid.
return finish(data_prefix(i - 1) .. 'fffff-ffff-ffff-ffff-ffffffffffff', uuids, records)

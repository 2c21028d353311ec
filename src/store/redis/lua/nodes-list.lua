--! keys 2
--! include nodes-common
-- nodes-list(KEYS: counts, versions; ARGV: prefix, mode, marker ('' = from the start),
-- budget, then the mode's arguments): one page of nodes in uuid order after the marker,
-- examining at most about `budget` entries and MAX_BUCKETS buckets, so the script never
-- holds Redis for long. Answers {next ('' = no more), uuid1, record1, uuid2, record2,
-- ...}; a page may be short, even empty, with next set.
--   places SHARD...  the nodes of these shards ('' = the unsharded pool); the caller
--                    passes each place's share of the budget
--   instance HOSTKEY [PLACE...]
--                    unsharded nodes whose instance is on that (lower-cased) host; with
--                    places ('' = the unsharded pool), the answer starts {next, n,
--                    version1..versionN, uuid1, ...}: those places' versions, read in the
--                    same step as the page (a cached listing of a place is then known to be
--                    no older than the page)
--   free             unsharded nodes without an instance: what nova's ring places
--   all | sharded    every node / every node with a shard
--   get UUID...      these nodes, in the order given ('' for one that is not there)
local mode, marker, budget = ARGV[2], ARGV[3], tonumber(ARGV[4])
local from = '-'
if marker ~= '' then from = '(' .. marker end
local MAX_BUCKETS = 1024

local function hex_value(c)
  return (string.find(HEX, c, 1, true) or 1) - 1
end

-- The name of bucket number i (0-based) of an index.
local function bucket_name(idx, i)
  local digits = ''
  for d = idx.len - 1, 0, -1 do
    local v = math.floor(i / 16 ^ d) % 16
    digits = digits .. string.sub(HEX, v + 1, v + 1)
  end
  return idx.base .. digits, digits
end

-- The highest uuid bucket number i can hold: where to go on after it.
local function end_of_bucket(idx, i)
  local _, digits = bucket_name(idx, i)
  return digits .. string.sub('ffffffff-ffff-ffff-ffff-ffffffffffff', idx.len + 1)
end

local function first_bucket(idx)
  if marker == '' then return 0 end
  local n = 0
  for d = 1, idx.len do n = n * 16 + hex_value(string.sub(marker, d, d)) end
  return n
end

-- Append to `out` up to `n` members of the index after the marker, in order. Answers
-- where to go on from: nil when the index was read to its end, else the last member
-- taken (full) or the highest uuid of the last bucket visited (MAX_BUCKETS reached).
local function walk(idx, n, out)
  local count, b, visited = 16 ^ idx.len, first_bucket(idx), 0
  while b < count do
    if n <= 0 then return out[#out] end
    if visited >= MAX_BUCKETS then return end_of_bucket(idx, b - 1) end
    local got = redis.call('ZRANGE', (bucket_name(idx, b)), from, '+', 'BYLEX', 'LIMIT', 0, n)
    for _, uuid in ipairs(got) do out[#out + 1] = uuid end
    n = n - #got
    visited = visited + 1
    b = b + 1
  end
  if n <= 0 then return out[#out] end
  return nil
end

local function finish(next_marker, uuids, records)
  local out = { next_marker or '' }
  for i, uuid in ipairs(uuids) do
    out[#out + 1] = uuid
    out[#out + 1] = records[i] or redis.call('HGET', data_key(uuid), uuid)
  end
  return out
end

-- The members of an index that pass `keep(record)`: examined up to the budget.
local function filtered(idx, keep)
  local seen, uuids, records = {}, {}, {}
  local resume = walk(idx, budget, seen)
  for _, uuid in ipairs(seen) do
    local record = redis.call('HGET', data_key(uuid), uuid)
    if keep(record) then
      uuids[#uuids + 1] = uuid
      records[#records + 1] = record
    end
  end
  return finish(resume, uuids, records)
end

if mode == 'get' then
  local out = { '' }
  for i = 5, #ARGV do
    out[#out + 1] = ARGV[i]
    out[#out + 1] = redis.call('HGET', data_key(ARGV[i]), ARGV[i]) or ''
  end
  return out
elseif mode == 'places' then
  -- Each place walked on its own, then merged. A place that stopped early (MAX_BUCKETS)
  -- has not said what lies past its stop: the page ends there at the latest.
  local merged, limit = {}, nil
  for i = 5, #ARGV do
    local resume = walk(place_index(ARGV[i]), budget, merged)
    if resume and (limit == nil or resume < limit) then limit = resume end
  end
  table.sort(merged)
  local uuids = {}
  for _, uuid in ipairs(merged) do
    if #uuids >= budget or (limit and uuid > limit) then break end
    uuids[#uuids + 1] = uuid
  end
  if #uuids >= budget then return finish(uuids[#uuids], uuids, {}) end
  return finish(limit, uuids, {})
elseif mode == 'instance' then
  local uuids = {}
  local out = finish(walk(host_index(ARGV[5]), budget, uuids), uuids, {})
  if #ARGV == 5 then return out end
  local places = {}
  for i = 6, #ARGV do places[#places + 1] = ARGV[i] end
  local versions = redis.call('HMGET', VERSIONS, unpack(places))
  local answer = { out[1], #places }
  for i = 1, #places do answer[#answer + 1] = versions[i] or '0' end
  for i = 2, #out do answer[#answer + 1] = out[i] end
  return answer
elseif mode == 'all' then
  local uuids = {}
  return finish(walk(ALL, budget, uuids), uuids, {})
elseif mode == 'free' then
  return filtered(place_index(''), function(record)
    local _, hk = placement(record)
    return hk == ''
  end)
end
-- sharded
return filtered(ALL, function(record) return (placement(record)) ~= '' end)

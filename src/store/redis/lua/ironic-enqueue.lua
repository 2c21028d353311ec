--! fragment
-- Prepended to traits-commit: queue one commit's changes for Ironic (src/store/ports/ironic-queue.ts).
-- queue: the node's partition stream; merged: the partition's folded records (node ->
-- JSON {since, traits: {TRAIT: sign}}); since: the folded nodes' start times; stats: the
-- store-wide counters. deltas: "+A -B", one commit's changes, each trait once.
-- Below the bound a commit is one stream entry. At the bound, or while the node already
-- has a folded record (its later changes must not overtake it), the changes fold into
-- the node's record, the last sign of each trait winning: Ironic ends in the same state,
-- the steps between are skipped. Nothing is dropped either way; both are counted.
local function ironic_enqueue(queue, merged, since, stats, node, deltas, generation, bound)
  local count = 0
  for _ in string.gmatch(deltas, '%S+') do
    count = count + 1
  end
  local folded = redis.call('HGET', merged, node)
  if not folded and redis.call('XLEN', queue) < bound then
    redis.call('XADD', queue, '*', 'n', node, 'g', generation, 'd', deltas)
    redis.call('HINCRBY', stats, 'pending', count)
    return
  end
  local record
  if folded then
    record = cjson.decode(folded)
  else
    local t = redis.call('TIME')
    record = { since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), traits = {} }
    redis.call('ZADD', since, record.since, node)
  end
  local added = 0
  for sign, trait in string.gmatch(deltas, '([+-])(%S+)') do
    if record.traits[trait] == nil then
      added = added + 1
    end
    record.traits[trait] = sign
  end
  redis.call('HSET', merged, node, cjson.encode(record))
  redis.call('HINCRBY', stats, 'pending', added)
  redis.call('HINCRBY', stats, 'coalesced', count)
end

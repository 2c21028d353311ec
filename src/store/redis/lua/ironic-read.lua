--! keys 2
-- ironic-read(KEYS[1]=a partition's queue stream, KEYS[2]=its folded records; ARGV: the
-- last entry id read or '' for the start, how many entries at most, the folded records'
-- scan cursor ('0' to begin) or '' to leave them, how many records to scan for).
-- Answers {entries, next scan cursor or '', folded records as node, record, ...}.
-- Folded records are read only in the same step that reaches the end of the stream: a
-- node's record began after its last stream entry, so the reader then holds every entry
-- the record must follow (and delivers it after them).
local from = '-'
if ARGV[1] ~= '' then
  from = '(' .. ARGV[1]
end
local limit = tonumber(ARGV[2])
local entries = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', limit)
if ARGV[3] == '' or #entries >= limit or redis.call('HLEN', KEYS[2]) == 0 then
  return { entries, '', {} }
end
local scan = redis.call('HSCAN', KEYS[2], ARGV[3], 'COUNT', tonumber(ARGV[4]))
return { entries, scan[1], scan[2] }

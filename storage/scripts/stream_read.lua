-- stream_read.lua: what an open event stream has not sent yet. Run after a
-- (re)subscription, when a publication may have been missed.
-- KEYS: box, msgs
-- ARGV: session (see digests in lib.lua), stream token, last stream id sent, max entries
-- Reply: {0} session invalid (mailbox expired or deleted); {2} a newer stream
--        took over; else {1, expires ms, node id, entry, ...} with the
--        entries after the last one sent (node id: see node_id in lib.lua).
local m = live_session(KEYS[1], ARGV[1], now_ms())
if not m then return {0} end
if redis.call('HGET', KEYS[1], 'st') ~= ARGV[2] then return {2} end
local out = {1, m[4], node_id()}
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[3], '+', 'COUNT', tonumber(ARGV[4]))
for i = 1, #entries do out[#out + 1] = entries[i] end
return out

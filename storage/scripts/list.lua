-- list.lua: one page of a mailbox's messages, newest first.
-- KEYS: box, msgs
-- ARGV: session digest, offset, limit
-- Reply: {1, has_more (0/1), entry, entry, ...} where entry is a stream entry
-- {stream id, {field, value, ...}}; or {0} when the session is invalid.
if not live_session(KEYS[1], ARGV[1], now_ms()) then return {0} end
local offset, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local entries = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', offset + limit + 1)
local out = {1, 0}
if #entries > offset + limit then out[2] = 1 end
for i = offset + 1, math.min(#entries, offset + limit) do out[#out + 1] = entries[i] end
return out

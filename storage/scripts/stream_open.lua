-- stream_open.lua: open the event stream of a session's mailbox. The new
-- stream takes over: its token is stored and published, so an older stream
-- of this mailbox on any node ends (newest wins).
-- KEYS: box, msgs, bodies, events
-- ARGV: session (see digests in lib.lua), stream token, Last-Event-ID message id ('' = none),
--       max entries to replay
-- Reply: {0} session invalid; else {1, id, address, created, expires, max,
--        last stream id ('0-0' when empty), node id (see node_id in
--        lib.lua: the node whose history the stream starts from), replayed
--        entry, ...}. Replayed
--        entries follow the Last-Event-ID message when it is a message of
--        this mailbox; otherwise nothing is replayed and streaming starts at
--        the current end of the stream.
local m = live_session(KEYS[1], ARGV[1], now_ms())
if not m then return {0} end
redis.call('HSET', KEYS[1], 'st', ARGV[2])
redis.call('SPUBLISH', KEYS[4], cjson.encode({type = 'takeover', token = ARGV[2]}))
local out = {1, m[1], m[2], m[3], m[4], m[5], '0-0', node_id()}
local after = false
if ARGV[3] ~= '' then after = message_sid(ARGV[3]) end
if after then
  out[7] = after
  local entries = redis.call('XRANGE', KEYS[2], '(' .. after, '+', 'COUNT', tonumber(ARGV[4]))
  for i = 1, #entries do out[#out + 1] = entries[i] end
  if #entries > 0 then out[7] = entries[#entries][1] end
else
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if #last > 0 then out[7] = last[1][1] end
end
return out

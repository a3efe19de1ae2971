-- destroy.lua: delete a mailbox and all its messages.
-- KEYS: box, msgs, bodies, events
-- ARGV: session (see digests in lib.lua)
-- Reply: {1, owner, node id}, or {0, node id} when the session is invalid
-- (durable: see select.lua).
-- Publishes {"type":"deleted"} on the events channel so open streams end.
local m = live_session(KEYS[1], ARGV[1], now_ms())
if not m then return {0, node_id()} end
local owner = redis.call('HGET', KEYS[1], 'o')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SPUBLISH', KEYS[4], cjson.encode({type = 'deleted'}))
return {1, owner, node_id()}

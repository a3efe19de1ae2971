-- extend.lua: push a mailbox's expiry later, never past its max expiry.
-- KEYS: box, msgs, bodies, events
-- ARGV: session (see digests in lib.lua), extension ms
-- Reply: {1, id, address, created, expires, max, owner, node id}, or {0,
-- node id} when the session is invalid (durable: see select.lua). Publishes {"type":"extended","expires":ms} on the events channel.
local m = live_session(KEYS[1], ARGV[1], now_ms())
if not m then return {0, node_id()} end
local exp, max = tonumber(m[4]), tonumber(m[5])
local new = math.min(exp + tonumber(ARGV[2]), max)
if new > exp then
  redis.call('HSET', KEYS[1], 'e', new)
  set_expiry(new)
  m[4] = new
  redis.call('SPUBLISH', KEYS[4], cjson.encode({type = 'extended', expires = new}))
end
return {1, m[1], m[2], m[3], m[4], m[5], redis.call('HGET', KEYS[1], 'o'), node_id()}

-- delete_message.lua: delete one message of the session's mailbox.
-- KEYS: box, msgs, bodies
-- ARGV: session (see digests in lib.lua), message id
-- Reply: {code, node id}: 1 deleted; 0 session invalid; 2 no such message
-- (durable: see select.lua).
if not live_session(KEYS[1], ARGV[1], now_ms()) then return {0, node_id()} end
local id = ARGV[2]
local sid = message_sid(id)
if not sid then return {2, node_id()} end
local e = redis.call('XRANGE', KEYS[2], sid, sid)
if #e == 0 then
  -- Fields without their entry: drop them.
  drop_message(sid, {'j', '{"id":"' .. id .. '"}'}, true)
  return {2, node_id()}
end
drop_message(sid, e[1][2])
return {1, node_id()}

-- delete_message.lua: delete one message of the session's mailbox.
-- KEYS: box, msgs, bodies
-- ARGV: session digest, message id
-- Reply: 1 deleted; 0 session invalid; 2 no such message.
if not live_session(KEYS[1], ARGV[1], now_ms()) then return 0 end
local sid = redis.call('HGET', KEYS[3], ARGV[2])
if not sid then return 2 end
local e = redis.call('XRANGE', KEYS[2], sid, sid)
if #e == 0 then
  redis.call('HDEL', KEYS[3], ARGV[2], ARGV[2] .. ':m', ARGV[2] .. ':k', ARGV[2] .. ':t', ARGV[2] .. ':h')
  return 2
end
drop_message(sid, e[1][2])
return 1

-- message.lua: one message with its bodies, for a message stored before the
-- pre-encoded layout (fields i, f, s, t, z and bodies <id>:t, <id>:h); Store
-- reads the current layout without a script (see MessageJSON).
-- KEYS: box, msgs, bodies
-- ARGV: session (see digests in lib.lua), message id
-- Reply: {1, stream id, {field, value, ...}, text, html}; {0} when the session
-- is invalid; {2} when the mailbox has no such message.
if not live_session(KEYS[1], ARGV[1], now_ms()) then return {0} end
local id = ARGV[2]
local sid = redis.call('HGET', KEYS[3], id)
if not sid then return {2} end
local e = redis.call('XRANGE', KEYS[2], sid, sid)
if #e == 0 then return {2} end
local b = redis.call('HMGET', KEYS[3], id .. ':t', id .. ':h')
return {1, sid, e[1][2], b[1] or '', b[2] or ''}

-- current.lua: the mailbox of a session.
-- KEYS: box
-- ARGV: session (see digests in lib.lua)
-- Reply: {1, id, address, created, expires, max}, or {0} when the session is invalid.
local m = live_session(KEYS[1], ARGV[1], now_ms())
if not m then return {0} end
return {1, m[1], m[2], m[3], m[4], m[5]}

-- exists.lua: whether a live mailbox has this address (SMTP RCPT check).
-- KEYS: box
-- ARGV: recipient address (lower case)
-- Reply: 1 live, 0 not.
local f = redis.call('HMGET', KEYS[1], 'a', 'e')
if not f[1] or f[1] ~= ARGV[1] or tonumber(f[2]) <= now_ms() then return 0 end
return 1

-- extend.lua: move a reserved mailbox's slot expiry, only while it still
-- holds a slot, and keep the client's hash until its latest slot.
-- KEYS: client hash (see slots.lua)
-- ARGV: mailbox tag, new expiry ms
-- Reply: 1 when the mailbox held a slot, 0 otherwise.
if redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'a:' .. ARGV[1], ARGV[2])
local _, top = live_slots(KEYS[1], now_ms())
keep_until(KEYS[1], top)
return 1

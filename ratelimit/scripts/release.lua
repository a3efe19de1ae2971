-- release.lua: free a mailbox's active slot, and let the client's hash
-- expire at its day window's end or its latest remaining slot.
-- KEYS: client hash (see slots.lua)
-- ARGV: mailbox tag
-- Reply: 1 when the mailbox held a slot, 0 otherwise.
if redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1]) == 0 then return 0 end
local _, top = live_slots(KEYS[1], now_ms())
keep_until(KEYS[1], top)
return 1

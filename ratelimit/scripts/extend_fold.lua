-- extend_fold.lua: move a reserved mailbox's slot expiry in its network's
-- fold (see fold.lua), only while it still holds a live slot, and keep the
-- fold until then.
-- KEYS: the fold
-- ARGV: mailbox tag, new expiry ms
-- Reply: 1 when the mailbox held a live slot, 0 otherwise.
local now = now_ms()
local exp, order = parse_slots(redis.call('HGET', KEYS[1], 's'), now)
if not exp[ARGV[1]] then return 0 end
exp[ARGV[1]] = tonumber(ARGV[2])
write_slots(KEYS[1], exp, order)
keep_until(KEYS[1], tonumber(ARGV[2]))
return 1

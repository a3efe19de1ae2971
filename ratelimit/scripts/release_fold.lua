-- release_fold.lua: free a mailbox's slot in its network's fold (see
-- fold.lua): from the network's slots and from its client's record.
-- KEYS: the fold
-- ARGV: mailbox tag, client key
-- Reply: 1 when the mailbox held a live slot, 0 otherwise.
local now = now_ms()
local cf = 'c:' .. ARGV[2]
local got = redis.call('HMGET', KEYS[1], 's', cf)
local exp, order = parse_slots(got[1], now)
local held = exp[ARGV[1]] ~= nil
exp[ARGV[1]] = nil
if got[1] then write_slots(KEYS[1], exp, order) end
if got[2] then
  local c = parse_windows(got[2])
  live_tags(c, exp)
  redis.call('HSET', KEYS[1], cf, format_windows(c, true))
end
if held then return 1 end
return 0

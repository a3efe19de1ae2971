-- release.lua: free a mailbox's active slot, and let the client's hash
-- expire at its day window's end or its latest remaining slot.
-- KEYS: client hash (see slots.lua), client ZSET of layout 2026-11-24
-- ARGV: mailbox tag
-- Reply: 1 when the mailbox held a slot (in either key), 0 otherwise.
if redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1]) == 1 then
  local _, top = live_slots(KEYS[1], now_ms())
  keep_until(KEYS[1], top)
  return 1
end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  keep_zset(KEYS[2])
  return 1
end
return 0

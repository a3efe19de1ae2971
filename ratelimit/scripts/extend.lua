-- extend.lua: move a reserved mailbox's slot expiry, only while it still
-- holds a slot (in the key of whichever layout holds it), and keep that key
-- until its latest slot.
-- KEYS: client hash (see slots.lua), client ZSET of layout 2026-11-24
-- ARGV: mailbox tag, new expiry ms
-- Reply: 1 when the mailbox held a slot, 0 otherwise.
if redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'a:' .. ARGV[1], ARGV[2])
  local _, top = live_slots(KEYS[1], now_ms())
  keep_until(KEYS[1], top)
  return 1
end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[1])
  keep_zset(KEYS[2])
  return 1
end
return 0

-- extend.lua: move a reserved mailbox's expiry, only while it still holds a
-- slot, and set the ZSET's TTL to its highest score.
-- KEYS: active ZSET
-- ARGV: mailbox tag, new expiry ms
-- Reply: 1 when the mailbox held a slot, 0 otherwise.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[1])
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(top[2])))
return 1

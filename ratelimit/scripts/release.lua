-- release.lua: free a mailbox's active slot and shorten the ZSET's TTL to
-- its new highest score (an empty ZSET is deleted by Redis).
-- KEYS: active ZSET
-- ARGV: mailbox tag
-- Reply: 1 when the mailbox held a slot, 0 otherwise.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if top[2] then
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(top[2])))
end
return 1

-- create.lua: create a mailbox.
-- KEYS: box, msgs, bodies, events (all of one mailbox tag)
-- ARGV: id (uuid), address, lifetime ms, max lifetime ms, scoped digest
--       (16 bytes, see lib.lua), owner
-- Reply: {1, created ms, expires ms, max expires ms, node id}, or {0, node id}
-- when the tag is taken (node id: see node_id in lib.lua).
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, node_id()} end
local now = now_ms()
local exp = now + tonumber(ARGV[3])
local max = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'a', ARGV[2], 'c', now, 'e', exp, 'x', max,
  'k', ARGV[5], 'o', ARGV[6], 'n', 0, 'b', 0, 'sn', 0)
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, now, exp, max, node_id()}

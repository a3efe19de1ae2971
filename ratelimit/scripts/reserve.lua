-- reserve.lua: one mailbox-creation attempt by a client. Every attempt is
-- counted in the minute, hour and day windows (aligned to the server clock),
-- also invalid and refused ones: the spec says failed attempts count.
-- KEYS: creation hash {mw, mn, hw, hn, dw, dn}, active ZSET (member mailbox
--       tag, score expiry ms)
-- ARGV: limit per minute, per hour, per day, active cap, mailbox tag,
--       lifetime ms (>= 1), valid ('1' or '0')
-- Reply: {code, retry ms}: code 0 reserved; 1 invalid (counted, nothing
-- reserved); 2 a window is full (retry = ms until the latest-resetting full
-- window resets); 3 active cap reached (retry 0).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'mw', 'mn', 'hw', 'hn', 'dw', 'dn')
local spans = {60000, 3600000, 86400000}
local names = {'m', 'h', 'd'}
local set = {}
local retry = 0
local reset = 0
for i = 1, 3 do
  local w = math.floor(now / spans[i])
  local n = 0
  if tonumber(cur[2 * i - 1]) == w then n = tonumber(cur[2 * i]) or 0 end
  n = n + 1
  set[4 * i - 3] = names[i] .. 'w'
  set[4 * i - 2] = string.format('%d', w)
  set[4 * i - 1] = names[i] .. 'n'
  set[4 * i] = n
  reset = (w + 1) * spans[i]
  if n > tonumber(ARGV[i]) then retry = math.max(retry, reset - now) end
end
redis.call('HSET', KEYS[1], unpack(set))
-- reset is now the end of the day window, the longest one in the hash.
redis.call('PEXPIREAT', KEYS[1], string.format('%d', reset))
if ARGV[7] ~= '1' then return {1, 0} end
if retry > 0 then return {2, retry} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return {3, 0} end
redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[6])), ARGV[5])
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], string.format('%d', tonumber(top[2])))
return {0, 0}

-- reserve.lua: one mailbox-creation attempt by a client. Every attempt is
-- counted in the minute, hour and day windows (aligned to the server clock),
-- also invalid and refused ones: the spec says failed attempts count.
-- KEYS: client hash {mw, mn, hw, hn, dw, dn, a:<mailbox tag> = expiry ms…}
--       (see slots.lua), client ZSET of the slots of layout 2026-11-24
--       (member mailbox tag, score expiry ms)
-- ARGV: limit per minute, per hour, per day, active cap, mailbox tag,
--       lifetime ms (>= 1), valid ('1' or '0'), the layout to write the slot
--       in ('1' the ZSET of 2026-11-24, '' the hash)
-- Reply: {code, retry ms, window}: code 0 reserved; 1 invalid (counted,
-- nothing reserved); 2 a window is full (retry = ms until the
-- latest-resetting full window resets, window its name: 'm', 'h' or 'd');
-- 3 active cap reached (retry 0). window is '' but for code 2.
-- The live slots are those of both layouts: a fleet that mixed releases
-- holds a client's slots in either key, and the cap counts them all.
local now = now_ms()
local cur = redis.call('HMGET', KEYS[1], 'mw', 'mn', 'hw', 'hn', 'dw', 'dn')
local spans = {60000, 3600000, 86400000}
local names = {'m', 'h', 'd'}
local set = {}
local retry = 0
local full = ''
for i = 1, 3 do
  local w = math.floor(now / spans[i])
  local n = 0
  if tonumber(cur[2 * i - 1]) == w then n = tonumber(cur[2 * i]) or 0 end
  n = n + 1
  set[4 * i - 3] = names[i] .. 'w'
  set[4 * i - 2] = string.format('%d', w)
  set[4 * i - 1] = names[i] .. 'n'
  set[4 * i] = n
  if n > tonumber(ARGV[i]) and (w + 1) * spans[i] - now >= retry then
    retry = (w + 1) * spans[i] - now
    full = names[i]
  end
end
redis.call('HSET', KEYS[1], unpack(set))
local live, top = live_slots(KEYS[1], now)
local held = #live + zset_slots(KEYS[2], now)
local code = 0
if ARGV[7] ~= '1' then code = 1
elseif retry > 0 then code = 2
elseif held >= tonumber(ARGV[4]) then code = 3
else
  local exp = now + tonumber(ARGV[6])
  if ARGV[8] == '1' then
    redis.call('ZADD', KEYS[2], string.format('%d', exp), ARGV[5])
    keep_zset(KEYS[2])
  else
    redis.call('HSET', KEYS[1], 'a:' .. ARGV[5], string.format('%d', exp))
    top = math.max(top, exp)
  end
end
keep_until(KEYS[1], top)
if code == 2 then return {2, retry, full} end
return {code, 0, ''}

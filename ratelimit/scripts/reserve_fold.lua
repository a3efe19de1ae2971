-- reserve_fold.lua: one mailbox-creation attempt by a client, against its
-- own limits and its network's share, in the network's fold (see
-- fold.lua; storage layout 2026-11-28). Every attempt counts in the
-- client's minute, hour and day windows, also invalid and refused ones
-- (the spec counts failed attempts); an attempt the client's limits admit
-- counts in the network's windows, as reserve.lua's second call does.
-- KEYS: the fold
-- ARGV: the client's limits per minute, hour, day and its active cap; the
--       network's; mailbox tag; lifetime ms (>= 1); valid ('1' or '0');
--       client key; mode ('' decides; 'm' mirrors a decision made in the
--       keys of an older layout: ARGV[14] '1' when the client's limits
--       admitted it, ARGV[15] '1' when it was reserved)
-- Reply: {code, retry ms, window, party}: code 0 reserved; 1 invalid
-- (counted, nothing reserved); 2 a window is full (retry = ms until the
-- latest-resetting full window resets, window its name: 'm', 'h' or 'd');
-- 3 active cap reached (retry 0). party: 'c' the client's limit, 'n' the
-- network's. A mirror always answers {0, 0, '', ''}.
local now = now_ms()
local minute = math.floor(now / 60000)
local key = KEYS[1]
local cf = 'c:' .. ARGV[12]
local got = redis.call('HMGET', key, 's', cf, 'n')
local exp, order, top = parse_slots(got[1], now)
prune(key, math.floor(now / 86400000), exp)
local c = parse_windows(got[2])
live_tags(c, exp)
local n = parse_windows(got[3])
count(c, minute)
local code, retry, window, party = 0, 0, '', ''
local counted, reserved = false, false
if ARGV[13] == 'm' then
  counted, reserved = ARGV[14] == '1', ARGV[15] == '1'
elseif ARGV[11] ~= '1' then
  code = 1
else
  party = 'c'
  retry, window = full(c, {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])}, now)
  if retry > 0 then code = 2
  elseif #c.tags >= tonumber(ARGV[4]) then code = 3
  else
    counted = true
    count(n, minute)
    party = 'n'
    retry, window = full(n, {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}, now)
    if retry > 0 then code = 2
    elseif #order >= tonumber(ARGV[8]) then code = 3
    else reserved, party = true, '' end
  end
end
if ARGV[13] == 'm' and counted then count(n, minute) end
if reserved and not exp[ARGV[9]] then
  local e = now + tonumber(ARGV[10])
  exp[ARGV[9]] = e
  order[#order + 1] = ARGV[9]
  c.tags[#c.tags + 1] = ARGV[9]
  if e > top then top = e end
end
redis.call('HSET', key, cf, format_windows(c, true))
if n.m then redis.call('HSET', key, 'n', format_windows(n, false)) end
write_slots(key, exp, order)
keep_until(key, math.max((math.floor(now / 86400000) + 1) * 86400000, top))
if ARGV[13] == 'm' then return {0, 0, '', ''} end
return {code, retry, window, party}

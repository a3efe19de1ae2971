-- take.lua: a lease of a short window (Limiter.Take): counts as many of the
-- hits asked for as the window has room for, and only those, on the primary
-- only, as count.lua counts (the same key, value and TTL). A refused lease
-- writes nothing, so hits handed back (give.lua) are room again.
-- KEYS: the counter of the current window
-- ARGV: its TTL in ms (two window lengths), hits wanted (>= 1), the limit
-- Reply: the hits granted, 0 to the hits wanted.
redis.set_repl(redis.REPL_NONE)
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = math.min(tonumber(ARGV[2]), math.max(tonumber(ARGV[3]) - cur, 0))
if n > 0 then
  redis.call('INCRBY', KEYS[1], n)
  redis.call('PEXPIRE', KEYS[1], ARGV[1], 'NX')
end
return n

-- window.lua: one hit on a fixed window aligned to the server clock (window
-- index = floor(now_ms / window_ms)). The window index is stored with the
-- count, so a key that outlives its window by a few ms is never miscounted.
-- KEYS: counter hash {w = window index, n = hits admitted in it}
-- ARGV: limit (>= 1), window length ms (>= 1)
-- Reply: 0 when the hit is admitted and counted; otherwise the ms until the
-- window resets (>= 1). A refused hit is not counted and writes nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local win = tonumber(ARGV[2])
local w = math.floor(now / win)
local reset = (w + 1) * win
local cur = redis.call('HMGET', KEYS[1], 'w', 'n')
local n = 0
if tonumber(cur[1]) == w then n = tonumber(cur[2]) or 0 end
if n >= tonumber(ARGV[1]) then return reset - now end
if n == 0 then
  -- %d: redis.call would print a large Lua number in exponent notation.
  redis.call('HSET', KEYS[1], 'w', string.format('%d', w), 'n', 1)
  redis.call('PEXPIREAT', KEYS[1], string.format('%d', reset))
else
  redis.call('HINCRBY', KEYS[1], 'n', 1)
end
return 0

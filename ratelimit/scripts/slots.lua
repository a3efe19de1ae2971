-- slots.lua is prepended to reserve.lua, release.lua and extend.lua (see
-- script in ratelimit.go). A client's hash holds its creation windows (mw,
-- mn, hw, hn, dw, dn) and one field per reserved mailbox, 'a:<mailbox tag>'
-- = the slot's expiry ms; one key per client instead of a hash and a ZSET
-- saves a key's overhead (~200 bytes) per client IP.

-- live_slots returns the client's slots that are live at now (field names)
-- and the latest expiry among them (0 if none); it deletes the expired ones.
local function live_slots(key, now)
  local all = redis.call('HGETALL', key)
  local live, dead, top = {}, {}, 0
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'a:' then
      local e = tonumber(all[i + 1]) or 0
      if e <= now then
        dead[#dead + 1] = f
      else
        live[#live + 1] = f
        if e > top then top = e end
      end
    end
  end
  if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
  return live, top
end

-- keep_until sets the hash to expire at the end of its day window or at its
-- latest live slot, whichever is later (%d: redis.call would print a large
-- Lua number in exponent notation).
local function keep_until(key, top)
  local dw = tonumber(redis.call('HGET', key, 'dw'))
  local day = dw and (dw + 1) * 86400000 or 0
  local at = math.max(day, top)
  if at > 0 then redis.call('PEXPIREAT', key, string.format('%d', at)) end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The slots of layout 2026-11-24 are a ZSET of their own (member mailbox
-- tag, score expiry ms, TTL its highest score): still counted, released and
-- extended, and written while the fleet writes that layout.

-- zset_slots drops the ZSET's expired slots and returns how many are live.
local function zset_slots(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  return redis.call('ZCARD', key)
end

-- keep_zset sets the ZSET to expire at its highest score, as 2026-11-24 did
-- (an empty ZSET is deleted by Redis).
local function keep_zset(key)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] then redis.call('PEXPIREAT', key, string.format('%d', tonumber(top[2]))) end
end

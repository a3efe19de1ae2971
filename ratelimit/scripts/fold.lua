-- fold.lua is prepended to reserve_fold.lua, release_fold.lua and
-- extend_fold.lua (storage layout 2026-11-28). A network's fold is one
-- hash (keys.fold) holding its share of the creations and every creation
-- record of its clients, so that a client IP costs no key of its own:
--   n           = "<minute> <mn> <hn> <dn>": the network's windows, the
--                 creations its clients' own limits admitted;
--   s           = "<tag> <expiry ms> …": the network's live slots, one per
--                 reserved mailbox;
--   c:<client>  = "<minute> <mn> <hn> <dn> <tag>…": the client's windows,
--                 every attempt, and the tags of its slots (a tag not in s
--                 is dead);
--   d           = the day number the client records were last pruned on.
-- <minute> is the minute number (server ms / 60000) of the last hit; the
-- hour and day it fell in are minute / 60 and minute / 1440, so one number
-- names all three windows (every hit counts in all three, as reserve.lua's
-- do). mn, hn and dn are the hits of that minute, hour and day.

local SPANS = {60000, 3600000, 86400000}
local PER = {1, 60, 1440} -- minutes in each window

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- parse_windows reads "<minute> <mn> <hn> <dn>[ <tag>…]" (nil: no hits
-- yet) into {m, n = {mn, hn, dn}, tags = {…}}.
local function parse_windows(v)
  local r = {m = nil, n = {0, 0, 0}, tags = {}}
  if not v then return r end
  local i = 0
  for w in string.gmatch(v, '%S+') do
    i = i + 1
    if i == 1 then r.m = tonumber(w)
    elseif i <= 4 then r.n[i - 1] = tonumber(w) or 0
    else r.tags[#r.tags + 1] = w end
  end
  return r
end

local function format_windows(r, with_tags)
  local s = string.format('%d %d %d %d', r.m, r.n[1], r.n[2], r.n[3])
  if with_tags and #r.tags > 0 then s = s .. ' ' .. table.concat(r.tags, ' ') end
  return s
end

-- count adds one hit at minute m to each of the record's windows.
local function count(r, m)
  for i = 1, 3 do
    if r.m and math.floor(r.m / PER[i]) == math.floor(m / PER[i]) then
      r.n[i] = r.n[i] + 1
    else
      r.n[i] = 1
    end
  end
  r.m = m
end

-- full returns the ms until the latest-resetting window over its limit
-- resets (0: none is) and that window's name ('m', 'h' or 'd').
local function full(r, limits, now)
  local retry, name = 0, ''
  local names = {'m', 'h', 'd'}
  for i = 1, 3 do
    local reset = (math.floor(r.m / PER[i]) + 1) * SPANS[i] - now
    if r.n[i] > limits[i] and reset >= retry then
      retry, name = reset, names[i]
    end
  end
  return retry, name
end

-- parse_slots reads s into the live slots: a map tag → expiry ms, the
-- tags in order, and the latest expiry (0 if none). Dead slots are left
-- out, so the next write of s drops them.
local function parse_slots(v, now)
  local exp, order, top = {}, {}, 0
  if not v then return exp, order, top end
  local tag
  for w in string.gmatch(v, '%S+') do
    if tag then
      local e = tonumber(w) or 0
      if e > now then
        exp[tag] = e
        order[#order + 1] = tag
        if e > top then top = e end
      end
      tag = nil
    else
      tag = w
    end
  end
  return exp, order, top
end

-- write_slots stores the live slots (or drops s when there are none).
local function write_slots(key, exp, order)
  local parts = {}
  for _, tag in ipairs(order) do
    if exp[tag] then
      parts[#parts + 1] = tag .. ' ' .. string.format('%d', exp[tag])
    end
  end
  if #parts == 0 then
    redis.call('HDEL', key, 's')
  else
    redis.call('HSET', key, 's', table.concat(parts, ' '))
  end
end

-- live_tags keeps the record's tags that still hold a live slot.
local function live_tags(r, exp)
  local live = {}
  for _, tag in ipairs(r.tags) do
    if exp[tag] then live[#live + 1] = tag end
  end
  r.tags = live
end

-- keep_until makes the fold outlive at (ms), never shortening its life.
local function keep_until(key, at)
  if redis.call('PEXPIRETIME', key) < at then
    redis.call('PEXPIREAT', key, string.format('%d', at))
  end
end

-- prune drops, once a day, the client records of earlier days that hold
-- no live slot: a network busy every day would otherwise keep each client
-- it ever had. It reads the whole hash, at most once per network a day.
local function prune(key, day, exp)
  if tonumber(redis.call('HGET', key, 'd')) == day then return end
  local all = redis.call('HGETALL', key)
  local dead = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'c:' then
      local r = parse_windows(all[i + 1])
      live_tags(r, exp)
      if (not r.m or math.floor(r.m / 1440) < day) and #r.tags == 0 then
        dead[#dead + 1] = f
      end
    end
  end
  if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
  redis.call('HSET', key, 'd', day)
end

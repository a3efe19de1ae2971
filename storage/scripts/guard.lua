-- guard.lua: the layout guard (storage/guard.go): which layout the fleet
-- writes, and which nodes read what. One call registers a node and decides
-- the layout it writes.
-- KEYS: the guard hash {w = the layout the fleet writes (the newest it has
--       accepted), t = ms it was set, n:<node> = "<newest layout it reads>
--       <registration end ms> <layout it writes> <version>", lw:<layout> =
--       the last ms a node was registered writing it, f = the ms from
--       which the limiter's folds decide, while the fleet writes the fold
--       layout or a newer one}
-- ARGV: node, newest layout it reads, oldest layout it reads, the setting
--       ('' = write what the fleet writes), version, the layout to start a
--       guard with ('' = the guard exists; see guard.go), registration ms,
--       guard TTL ms, hold ms (how long data of a layout outlives its last
--       writer: a layout stops being the fleet's only when nothing wrote it
--       that long), the fold layout (ratelimit's folds: the first layout
--       that writes them), the mirror ms (how long the folds only mirror
--       the older keys once the fleet raised its layout to the fold
--       layout: they decide once they hold every creation window still
--       open; on a guard started at that layout, at once: a minute ago)
-- Reply: {1, layout to write, the fleet's layout, f (0: none)};
--        {0, setting, node, its newest layout, its version}: a live node
--        cannot read the setting's layout;
--        {2, the fleet's layout}: the fleet writes a layout this node
--        cannot read;
--        {3, setting}: the setting is older than this node reads.
-- Layout names are dates: they compare as strings.
local now = now_ms()
local me, reads, oldest, setting, version = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl, keep, hold = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
if setting ~= '' and setting < oldest then return {3, setting} end
local all = redis.call('HGETALL', KEYS[1])
local g, others, dead = {}, {}, {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  g[f] = v
  if string.sub(f, 1, 2) == 'n:' then
    local r, untl, w, ver = string.match(v, '^(%S+) (%d+) (%S+) ?(.*)$')
    if not untl or tonumber(untl) <= now then
      dead[#dead + 1] = f
    elseif f ~= 'n:' .. me then
      others[#others + 1] = {string.sub(f, 3), r, w, ver}
    end
  end
end
if #dead > 0 then redis.call('HDEL', KEYS[1], unpack(dead)) end
local w = g['w']
local fresh = false
if not w then
  if ARGV[6] == '' then return redis.error_reply('guard.lua: no guard and no layout to start one with') end
  w = ARGV[6]
  fresh = true
  redis.call('HSET', KEYS[1], 'w', w, 't', now)
end
if w > reads then return {2, w} end
local want = setting
if want == '' then want = w end
if want > w then
  for _, o in ipairs(others) do
    if o[2] < want then return {0, want, o[1], o[2], o[4]} end
  end
  w = want
  redis.call('HSET', KEYS[1], 'w', w, 't', now)
elseif want < w then
  -- The fleet's layout comes down once no live node writes it and nothing
  -- has written it for hold ms: its data is gone by then.
  local top = want
  local busy = false
  for _, o in ipairs(others) do
    if o[3] >= w then busy = true end
    if o[3] > top then top = o[3] end
  end
  if not busy and (tonumber(g['lw:' .. w]) or 0) + hold <= now then
    w = top
    redis.call('HSET', KEYS[1], 'w', w, 't', now)
  end
end
local f = tonumber(g['f'])
if w >= ARGV[10] then
  if not f then
    -- A guard started at the fold layout has no older keys to wait for:
    -- its folds decide at once (a minute back, for nodes whose clocks
    -- run behind Redis's).
    f = now - 60000
    if not fresh then f = now + tonumber(ARGV[11]) end
    redis.call('HSET', KEYS[1], 'f', string.format('%d', f))
  end
elseif f then
  f = nil
  redis.call('HDEL', KEYS[1], 'f')
end
redis.call('HSET', KEYS[1], 'n:' .. me, reads .. ' ' .. string.format('%d', now + ttl) .. ' ' .. want .. ' ' .. version,
  'lw:' .. want, now)
redis.call('PEXPIRE', KEYS[1], keep)
return {1, want, w, f or 0}

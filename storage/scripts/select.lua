-- select.lua: open a session on a mailbox with its mailbox-scoped credential.
-- KEYS: box, msgs, bodies, events
-- ARGV: mailbox id (uuid), scoped digest, new session digest, max sessions
-- Reply: {1, id, address, created, expires, max} on success;
--        {0} when the mailbox is gone; {2} when id or credential do not match.
-- Past max sessions it revokes the oldest and publishes
-- {"type":"revoked","session":<its digest>} on the events channel.
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'id', 'a', 'c', 'e', 'x', 'k', 'sn')
if not f[1] or tonumber(f[4]) <= now then return {0} end
-- Both comparisons always run, so timing does not tell which one failed.
local ok_id = ct_equal(f[1], ARGV[1])
local ok_key = ct_equal(f[6], ARGV[2])
if not (ok_id and ok_key) then return {2} end
-- Sessions are numbered, not timed: two selects in one millisecond still
-- have an order for revoking the oldest.
local seq = redis.call('HINCRBY', KEYS[1], 'sq', 1)
redis.call('HSET', KEYS[1], 's:' .. ARGV[3], seq)
local sn = redis.call('HINCRBY', KEYS[1], 'sn', 1)
if sn > tonumber(ARGV[4]) then
  -- Bound the sessions a mailbox keeps: the oldest one is revoked.
  local all = redis.call('HGETALL', KEYS[1])
  local oldest, at
  for i = 1, #all, 2 do
    local name = all[i]
    if string.sub(name, 1, 2) == 's:' and name ~= 's:' .. ARGV[3] then
      local t = tonumber(all[i + 1])
      if not at or t < at then oldest, at = name, t end
    end
  end
  if oldest then
    redis.call('HDEL', KEYS[1], oldest)
    redis.call('HINCRBY', KEYS[1], 'sn', -1)
    -- An event stream open with the revoked session ends, on any node.
    redis.call('SPUBLISH', KEYS[4], cjson.encode({type = 'revoked', session = string.sub(oldest, 3)}))
  end
end
return {1, f[1], f[2], f[3], f[4], f[5]}

-- select.lua: open a session on a mailbox with its mailbox-scoped credential.
-- KEYS: box, msgs, bodies, events
-- ARGV: mailbox id (uuid), scoped credential (see digests in lib.lua), new
--       session digest (16 bytes), max sessions
-- Reply: {1, id, address, created, expires, max, node id} on success;
--        {0, node id} when the mailbox is gone; {2, node id} when id or
--        credential do not match (node id: see node_id in lib.lua; the
--        session must survive a failover, so Store.Select waits for the
--        replicas: durable, see storage/durable.go).
-- Past max sessions it revokes the oldest and publishes
-- {"type":"revoked","session":<its digest in hex>} on the events channel.
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'id', 'a', 'c', 'e', 'x', 'k', 'sn')
if not f[1] or tonumber(f[4]) <= now then return {0, node_id()} end
-- k is stored as a 16-byte digest, or as 64 hex digits by a mailbox made
-- before 2026-11-25: compare with the form it has.
local k = f[6] or ''
local cur, old = digests(ARGV[2])
local want = cur
if #k == #old then want = old end
-- Both comparisons always run, so timing does not tell which one failed.
local ok_id = ct_equal(f[1], ARGV[1])
local ok_key = ct_equal(k, want)
if not (ok_id and ok_key) then return {2, node_id()} end
-- Sessions are numbered, not timed: two selects in one millisecond still
-- have an order for revoking the oldest.
local seq = redis.call('HINCRBY', KEYS[1], 'sq', 1)
local mine = 's:' .. ARGV[3]
redis.call('HSET', KEYS[1], mine, seq)
local sn = redis.call('HINCRBY', KEYS[1], 'sn', 1)
if sn > tonumber(ARGV[4]) then
  -- Bound the sessions a mailbox keeps: the oldest one is revoked. The box
  -- holds the messages too, so only its session fields are read.
  local oldest, at
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', 's:*', 'COUNT', 100)
    cursor = r[1]
    for i = 1, #r[2], 2 do
      local name = r[2][i]
      -- A session field is s: and a 16-byte or 64-hex digest; a message's
      -- field named by its id's 16 bytes may start with s: too.
      if name ~= mine and (#name == 18 or #name == 66) then
        local t = tonumber(r[2][i + 1])
        if t and (not at or t < at) then oldest, at = name, t end
      end
    end
  until cursor == '0'
  if oldest then
    redis.call('HDEL', KEYS[1], oldest)
    redis.call('HINCRBY', KEYS[1], 'sn', -1)
    -- An event stream open with the revoked session ends, on any node.
    local d = string.sub(oldest, 3)
    if #d ~= #old then d = hex(d) end
    redis.call('SPUBLISH', KEYS[4], cjson.encode({type = 'revoked', session = d}))
  end
end
return {1, f[1], f[2], f[3], f[4], f[5], node_id()}

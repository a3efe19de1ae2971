-- lib.lua is prepended to every storage script (see scripts.go).
-- Box hash fields: id (uuid), a (address), c (created ms), e (expires ms),
-- x (max expires ms), k (sha256 hex of the mailbox-scoped secret), o (owner,
-- the creator's rate-limit client key), n (message count), b (stored bytes),
-- sn (session count), sq (sessions ever issued), s:<sha256 hex> (one field
-- per session: its sequence number),
-- st (token of the mailbox's current event stream).

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- node_id is the id of the cluster node running the script, '' on a
-- standalone server. The durable scripts (create, deliver) end their reply
-- with it, so the caller can tell whether the write landed on the primary it
-- expected (see storage/durable.go).
local function node_id()
  local r = redis.pcall('CLUSTER', 'MYID')
  if type(r) == 'string' then return r end
  return ''
end

-- live_session returns the box's {id, a, c, e, x} when digest names a session
-- of a mailbox that has not reached its expiry, else nil. The lookup is a
-- hash-field probe keyed by the SHA-256 of a 256-bit secret: there is no
-- secret comparison whose timing could leak.
local function live_session(box, digest, now)
  local f = redis.call('HMGET', box, 's:' .. digest, 'id', 'a', 'c', 'e', 'x')
  if not f[1] or not f[5] or tonumber(f[5]) <= now then return nil end
  return {f[2], f[3], f[4], f[5], f[6]}
end

-- ct_equal compares two strings in time that depends only on their length.
local function ct_equal(a, b)
  if #a ~= #b then return false end
  local d = 0
  for i = 1, #a do d = bit.bor(d, bit.bxor(string.byte(a, i), string.byte(b, i))) end
  return d == 0
end

-- set_expiry moves every key of the mailbox to expire at ms.
local function set_expiry(ms)
  for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], ms) end
end

-- drop_message removes one message (stream entry, bodies, delivery key) and,
-- unless uncounted, its accounting; it returns the bytes it counted. fields are the entry's
-- field/value list: j, the summary JSON, whose first member is the id (see
-- deliver.lua; size and key are in the bodies field <id>:k), or the i, z and
-- d fields of entries stored before the pre-encoded layout.
local function drop_message(sid, fields, uncounted)
  local id, size, key
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    if f == 'j' then id = string.match(v, '^{"id":"([^"]+)"')
    elseif f == 'i' then id = v elseif f == 'z' then size = v elseif f == 'd' then key = v end
  end
  if id and not size then
    local k = redis.call('HGET', KEYS[3], id .. ':k')
    if k then size, key = string.match(k, '^(%d+) ?(%S*)$') end
  end
  size = tonumber(size) or 0
  redis.call('XDEL', KEYS[2], sid)
  if id then
    if key and key ~= '' then
      redis.call('HDEL', KEYS[3], id, id .. ':m', id .. ':k', id .. ':t', id .. ':h', 'd:' .. key)
    else
      redis.call('HDEL', KEYS[3], id, id .. ':m', id .. ':k', id .. ':t', id .. ':h')
    end
  end
  if not uncounted then
    redis.call('HINCRBY', KEYS[1], 'n', -1)
    redis.call('HINCRBY', KEYS[1], 'b', -size)
  end
  return size
end

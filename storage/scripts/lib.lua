-- lib.lua is prepended to every storage script (see scripts.go).
-- Box hash fields: id (uuid), a (address), c (created ms), e (expires ms),
-- x (max expires ms), k (digest of the mailbox-scoped secret), o (owner,
-- the creator's rate-limit client key), n (message count), b (stored bytes),
-- sn (session count), sq (sessions ever issued), s:<digest> (one field
-- per session: its sequence number),
-- st (token of the mailbox's current event stream); and per message, with
-- <id> the 16 bytes of its uuid (see id_bytes): <id> = "<stream id> <size>[
-- <delivery key>]", <id>m = the message JSON without its id member,
-- d:<delivery key> = stream id (see deliver.lua). The names' lengths (16,
-- 17, 18 with d: or s:, 1–2 for the rest) keep them apart.
-- A digest is the first 16 bytes of the SHA-256 of the secret, raw; before
-- 2026-11-25 it was the whole SHA-256 in hex, and messages went to the
-- bodies hash (KEYS[3]): both are still read, so a rolling upgrade serves
-- the mailboxes it finds.

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

-- digests splits a credential argument (Credential.digests in Go): the
-- 16-byte digest stored now, then the 64-hex digest stored before.
local function digests(arg)
  return string.sub(arg, 1, 16), string.sub(arg, 17)
end

-- hex is s in lower-case hex digits.
local function hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

-- live_session returns the box's {id, a, c, e, x} when the credential
-- argument (see digests) names a session of a mailbox that has not reached
-- its expiry, else nil. The lookup is a hash-field probe keyed by the
-- SHA-256 of a 256-bit secret, under both field names: there is no secret
-- comparison whose timing could leak.
local function live_session(box, arg, now)
  local cur, old = digests(arg)
  local f = redis.call('HMGET', box, 's:' .. cur, 's:' .. old, 'id', 'a', 'c', 'e', 'x')
  if not (f[1] or f[2]) or not f[6] or tonumber(f[6]) <= now then return nil end
  return {f[3], f[4], f[5], f[6], f[7]}
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

-- id_bytes is message id (a uuid's 36 characters) as the box's field
-- names hold it: its 16 bytes.
local function id_bytes(id)
  return (string.gsub(string.gsub(id, '-', ''), '%x%x', function(h) return string.char(tonumber(h, 16)) end))
end

-- parse_meta reads a message's box field <id>: its stream id, size and
-- delivery key ('' when none).
local function parse_meta(v)
  local sid, size, key = string.match(v, '^(%S+) (%d+) ?(.*)$')
  return sid, tonumber(size) or 0, key or ''
end

-- message_sid is the stream id of message id, from the box or, for a
-- message stored before 2026-11-25, the bodies hash; nil when there is no
-- such message.
local function message_sid(id)
  local meta = redis.call('HGET', KEYS[1], id_bytes(id))
  if meta then return (parse_meta(meta)) end
  return redis.call('HGET', KEYS[3], id) or nil
end

-- entry_id is the message id of a stream entry's field/value list: the
-- first member of its summary JSON j (see deliver.lua), or the i field of an
-- entry stored before the pre-encoded layout.
local function entry_id(fields)
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    if f == 'j' then return string.match(v, '^{"id":"([^"]+)"') elseif f == 'i' then return v end
  end
end

-- drop_message removes one message (stream entry, its box fields or the
-- bodies fields of an older layout, delivery key) and, unless uncounted, its
-- accounting; it returns the bytes it counted. fields are the entry's
-- field/value list (see entry_id); entries stored before the pre-encoded
-- layout carry their size and key in fields z and d.
local function drop_message(sid, fields, uncounted)
  local id, size, key = entry_id(fields), nil, nil
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    if f == 'z' then size = v elseif f == 'd' then key = v end
  end
  redis.call('XDEL', KEYS[2], sid)
  local idb = id and id_bytes(id)
  local meta = idb and redis.call('HGET', KEYS[1], idb)
  if meta then
    local _, n, k = parse_meta(meta)
    size = n
    if k ~= '' then
      redis.call('HDEL', KEYS[1], idb, idb .. 'm', 'd:' .. k)
    else
      redis.call('HDEL', KEYS[1], idb, idb .. 'm')
    end
  elseif id then
    if not size then
      local k = redis.call('HGET', KEYS[3], id .. ':k')
      if k then size, key = string.match(k, '^(%d+) ?(%S*)$') end
    end
    if key and key ~= '' then
      redis.call('HDEL', KEYS[3], id, id .. ':m', id .. ':k', id .. ':t', id .. ':h', 'd:' .. key)
    else
      redis.call('HDEL', KEYS[3], id, id .. ':m', id .. ':k', id .. ':t', id .. ':h')
    end
  end
  size = tonumber(size) or 0
  if not uncounted then
    redis.call('HINCRBY', KEYS[1], 'n', -1)
    redis.call('HINCRBY', KEYS[1], 'b', -size)
  end
  return size
end

-- stored_size is the bytes counted for the message of a stream entry's
-- field/value list (see drop_message): from its box field, its z field
-- (before the pre-encoded layout) or its bodies field <id>:k (2026-11-24).
local function stored_size(fields)
  local id
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    if f == 'z' then return tonumber(v) or 0 end
    if f == 'j' then id = string.match(v, '^{"id":"([^"]+)"') elseif f == 'i' then id = v end
  end
  if not id then return 0 end
  local meta = redis.call('HGET', KEYS[1], id_bytes(id))
  if meta then
    local _, n = parse_meta(meta)
    return n
  end
  local k = redis.call('HGET', KEYS[3], id .. ':k')
  return k and tonumber(string.match(k, '^(%d+)')) or 0
end

-- recount is the mailbox's message count and stored bytes read from what it
-- holds, not from its counters n and b: a fleet that mixed releases could
-- leave b too high (see deliver.lua), which would evict messages early.
local function recount()
  local all = redis.call('XRANGE', KEYS[2], '-', '+')
  local b = 0
  for i = 1, #all do b = b + stored_size(all[i][2]) end
  return #all, b
end

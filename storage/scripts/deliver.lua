-- deliver.lua: append one message to a live mailbox.
-- KEYS: box, msgs, bodies, events
-- ARGV: the inbox's address (lower case; for a sub-address local+tag@domain,
--       local@domain: the tag is in the JSONs' "to"), message id, summary
--       JSON, message
--       JSON without its id member (see storage/encode.go), size (bytes
--       counted against the mailbox), max messages, max mailbox bytes,
--       delivery key as stored (16 bytes of the SHA-256 of the raw message,
--       or empty: no deduplication), the same key as mailboxes stored
--       before 2026-11-25 hold it (64 hex digits), the message id's 16
--       bytes (see id_bytes in lib.lua), the layout to write ('1' the
--       bodies hash of layout 2026-11-24, with the message JSON in ARGV[4]
--       holding its id member and the key in its 64-hex form; '' the box,
--       layout 2026-11-25: storage/layout.go)
-- Reply: {1, stream id, message id, node id} delivered; {2, stream id,
--        message id, node id} the message with that delivery key is still
--        stored, so nothing was (the reply names that one); {0, node id} no
--        live mailbox at that address (node id: see node_id in lib.lua).
-- The stream entry is {j = summary JSON}, nothing else, so a page of the
-- list is one value per message; the box gets <id> = "<stream id> <size>
-- <key>" (for drop_message), <id>m = message JSON and d:<key> = stream id
-- (<id>: the id's 16 bytes):
-- the delivery key is dropped with its message (drop_message), so the
-- dedupe window is the stored life of the first copy. Messages delivered
-- before 2026-11-25 are in the bodies hash (<id> = stream id, <id>:m,
-- <id>:k = "<size> <key>", d:<key> = id); their keys are looked up there
-- too while it exists.
-- A duplicate still writes (it re-sets its key's field), so that a WAIT
-- after this call covers the first copy's replication too.
-- Evicts the oldest messages while a cap is exceeded, then publishes
-- {"type":"message","sid":…,"node":<node id>,"summary":<summary JSON>} on
-- the events channel when this node has a subscriber to it (PUBSUB
-- SHARDNUMSUB, which counts this node's own): the edges subscribe on the
-- slot's primary (storage/receiver.go), where this runs, and in a cluster
-- every SPUBLISH is also sent over the cluster bus to each replica of the
-- shard, read by every replica per delivery while no stream is open (about
-- 2 µs of a replica's CPU and 1 µs of the primary's; bench/HISTORY.md,
-- round seven). A stream that was resubscribing elsewhere (a failover,
-- a slot move) catches up when it is subscribed again and at every
-- heartbeat (edge/events.go), as it did when the publication went to a
-- node it had left. The node id lets an open stream tell that the node
-- answering for the mailbox changed (edge/events.go); the edge re-encodes
-- the summary for its clients, so the field never reaches them.
-- It is the one call of a delivery, so it makes as few calls of its own as
-- it can: one read of the box, one write of the message with its counters,
-- and the stream's expiry set only when the mailbox held no message
-- (otherwise it exists with the mailbox's expiry already).
-- A mixed fleet may have left the stream or the bodies hash without a TTL
-- (a node of 2026-11-24 sets it only on a mailbox's first message by its
-- own count), or the byte count too high (it counted messages of the newer
-- layout as 0 bytes when it evicted them): both are repaired here, the
-- count when it would evict by bytes (recount in lib.lua).
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'a', 'e', 'n', 'b')
if not f[1] or f[1] ~= ARGV[1] or tonumber(f[2]) <= now then return {0, node_id()} end
local exp = tonumber(f[2])
local key = ARGV[8]
if key ~= '' then
  local firstsid = redis.call('HGET', KEYS[1], 'd:' .. key)
  local e = firstsid and redis.call('XRANGE', KEYS[2], firstsid, firstsid)
  if e and #e > 0 then
    redis.call('HSET', KEYS[1], 'd:' .. key, firstsid)
    return {2, firstsid, entry_id(e[1][2]), node_id()}
  end
  if redis.call('EXISTS', KEYS[3]) == 1 then
    local old = 'd:' .. ARGV[9]
    local first = redis.call('HGET', KEYS[3], old)
    firstsid = first and redis.call('HGET', KEYS[3], first)
    if firstsid then
      redis.call('HSET', KEYS[3], old, first)
      return {2, firstsid, first, node_id()}
    end
  end
end
local id, idb, legacy = ARGV[2], ARGV[10], ARGV[11] == '1'
local n, b = (tonumber(f[3]) or 0), (tonumber(f[4]) or 0)
local maxn, maxb = tonumber(ARGV[6]), tonumber(ARGV[7])
if b + tonumber(ARGV[5]) > maxb then n, b = recount() end
local sid = redis.call('XADD', KEYS[2], '*', 'j', ARGV[3])
if n <= 0 or redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIREAT', KEYS[2], exp) end
n, b = n + 1, b + tonumber(ARGV[5])
while n > maxn or b > maxb do
  local old = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
  if #old == 0 or old[1][1] == sid then break end
  n = n - 1
  b = b - drop_message(old[1][1], old[1][2], true)
end
if legacy then
  -- Layout 2026-11-24: what a node of that release reads, lists, deletes
  -- and dedupes against (its drop_message, its delivery check).
  local okey = ARGV[9]
  if okey ~= '' then
    redis.call('HSET', KEYS[3], id, sid, id .. ':m', ARGV[4], id .. ':k', ARGV[5] .. ' ' .. okey, 'd:' .. okey, id)
  else
    redis.call('HSET', KEYS[3], id, sid, id .. ':m', ARGV[4], id .. ':k', ARGV[5])
  end
  redis.call('PEXPIREAT', KEYS[3], exp)
  redis.call('HSET', KEYS[1], 'n', n, 'b', b)
else
  if key ~= '' then
    redis.call('HSET', KEYS[1], idb, sid .. ' ' .. ARGV[5] .. ' ' .. key, idb .. 'm', ARGV[4], 'd:' .. key, sid, 'n', n, 'b', b)
  else
    redis.call('HSET', KEYS[1], idb, sid .. ' ' .. ARGV[5], idb .. 'm', ARGV[4], 'n', n, 'b', b)
  end
  if redis.call('PTTL', KEYS[3]) == -1 then redis.call('PEXPIREAT', KEYS[3], exp) end
end
local node = node_id()
if redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[4])[2] > 0 then
  redis.call('SPUBLISH', KEYS[4], '{"type":"message","sid":"' .. sid .. '","node":"' .. node .. '","summary":' .. ARGV[3] .. '}')
end
return {1, sid, id, node}

-- count.lua: one hit on each of a client's short fixed windows (the request
-- rate, the SMTP minutes), counted on the primary only. The windows are
-- aligned to the counting node's clock and named by the key, as the native
-- INCR and PEXPIRE NX that nodes before issue 35 send: the same keys, values
-- and TTLs, so both kinds of node count in one number.
-- KEYS: the counters (strings), in the client's slot
-- ARGV: each counter's TTL in ms (two window lengths), in KEYS' order
-- Reply: each counter's count after this hit, in KEYS' order.
--
-- Nothing is replicated (nor written to the AOF): a replica never holds
-- these counters, so a failover starts the client's current windows again
-- (at most one extra window's allowance per client, once), and a primary
-- sends its replicas nothing per request. The primary's expiry of a counter
-- still sends them a DEL of a key they do not have.
redis.set_repl(redis.REPL_NONE)
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('INCR', key)
  redis.call('PEXPIRE', key, ARGV[i], 'NX')
end
return out

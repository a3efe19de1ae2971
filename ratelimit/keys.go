package ratelimit

import "strconv"

// keys is the only place that spells a Redis key of ratelimit. Every key of
// one client carries the client key in braces, so Redis Cluster puts them in
// one slot and one script may touch them all; the global creation counter has
// a slot of its own.
type keys struct {
	base   string // "<prefix>:rl:{", so a per-request key costs one concatenation
	global string
}

func newKeys(prefix string) keys {
	return keys{
		base: prefix + ":rl:{",
		// The suffix differs from every per-client suffix, so no client key,
		// not even the literal "global", can collide with it.
		global: prefix + ":rl:{global}:global-create",
	}
}

// tag keeps the hash tag non-empty: Redis ignores an empty "{}" and would
// hash each key whole, scattering one client's keys over several slots.
func tag(client string) string {
	if client == "" {
		return "unknown"
	}
	return client
}

// window is the counter of the client's hits on the rule name (the request
// rate is the rule "request") in window number w (node clock ms / window
// length): a string holding the count (TTL: two window lengths from the last
// hit). Rule names live under "w:" so none can shadow another key.
func (k keys) window(name, client string, w int64) string {
	var num [20]byte
	return k.base + tag(client) + "}:w:" + name + ":" + string(strconv.AppendInt(num[:0], w, 10))
}

// creation is the client's hash of its minute, hour and day creation windows
// {mw, mn, hw, hn, dw, dn} and of its reserved mailboxes, a field
// 'a:<mailbox tag>' = expiry ms each (TTL: PEXPIREAT the end of the day
// window or the latest slot, whichever is later; scripts/slots.lua).
func (k keys) creation(client string) string { return k.base + tag(client) + "}:create" }

// active is the ZSET of the client's reserved mailboxes of storage layout
// 2026-11-24, scored by expiry in ms (TTL: PEXPIREAT the highest score).
// Read with the hash's slots always, written while the fleet writes that
// layout (Limiter.SetZSetSlots).
func (k keys) active(client string) string { return k.base + tag(client) + "}:active" }

// network is the hash of a network's share of the creations (storage
// layout 2026-11-26; net: NetworkOf, e.g. "198.51.100.0/24"): the same
// fields as creation, counting the creations its clients' own limits
// admitted, and its reserved mailboxes (TTL as creation's). The "net:"
// in its tag keeps it apart from every client key.
func (k keys) network(net string) string { return k.base + "net:" + net + "}:create" }

// networkZSet is the sorted set reserve.lua takes beside a network's hash,
// in its slot; never written (a network's slots are in its hash).
func (k keys) networkZSet(net string) string { return k.base + "net:" + net + "}:active" }

// fold is the hash of a network's share of the creations and of its
// clients' creation records (storage layout 2026-11-28; scripts/fold.lua
// says its fields): one key per network instead of a hash per client and
// one per network. A client key without a network (NetworkOf "") has a
// fold of its own. TTL: PEXPIREAT the end of the day of its last attempt
// or its latest slot, whichever is later; never shortened.
func (k keys) fold(client string) string {
	if net := NetworkOf(client); net != "" {
		return k.base + "net:" + net + "}:fold"
	}
	return k.base + tag(client) + "}:fold"
}

// CreationKeys names, under prefix, the keys that hold client's creation
// records in the layouts this release writes: its own hash (before
// 2026-11-28), its network's hash (2026-11-26 and 2026-11-27) and its
// network's fold (2026-11-28); the network's two are shared with its other
// clients. For tools that measure them, such as bench's memory model.
func CreationKeys(prefix, client string) []string {
	k := newKeys(prefix)
	out := []string{k.creation(client)}
	if net := NetworkOf(client); net != "" {
		out = append(out, k.network(net))
	}
	return append(out, k.fold(client))
}

// globalCreation is the hash {w, n} of the service-wide creation minute
// (TTL: PEXPIREAT end of the minute).
func (k keys) globalCreation() string { return k.global }

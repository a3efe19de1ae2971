package ratelimit

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

// request is the hash {w, n} of the client's one-second request window
// (TTL: PEXPIREAT end of the window).
func (k keys) request(client string) string { return k.base + tag(client) + "}:req" }

// rule is the hash {w, n} of a generic fixed-window rule (TTL: PEXPIREAT end
// of the window). Rule names live under "r:" so none can shadow another key.
func (k keys) rule(name, client string) string {
	return k.base + tag(client) + "}:r:" + name
}

// creation is the hash {mw, mn, hw, hn, dw, dn} of the client's minute, hour
// and day creation windows (TTL: PEXPIREAT end of the day window).
func (k keys) creation(client string) string { return k.base + tag(client) + "}:create" }

// active is the ZSET of the client's reserved mailboxes, scored by expiry in
// ms (TTL: PEXPIREAT the highest score).
func (k keys) active(client string) string { return k.base + tag(client) + "}:active" }

// globalCreation is the hash {w, n} of the service-wide creation minute
// (TTL: PEXPIREAT end of the minute).
func (k keys) globalCreation() string { return k.global }

package storage

// keys is the only place that spells a Redis key or channel name of storage.
// Every key of one mailbox carries the mailbox tag in braces so that Redis
// Cluster puts them in one slot and a script may touch them all.
type keys struct{ prefix string }

// box is the mailbox hash (TTL: PEXPIREAT expires_at).
func (k keys) box(tag string) string { return k.prefix + ":{" + tag + "}:box" }

// msgs is the mailbox's message stream, oldest first (same TTL as box).
func (k keys) msgs(tag string) string { return k.prefix + ":{" + tag + "}:msgs" }

// bodies is the hash of message bodies and stream ids of the layout before
// 2026-11-25 (same TTL as box): still read, evicted and deleted, no longer
// written; messages are in the box now.
func (k keys) bodies(tag string) string { return k.prefix + ":{" + tag + "}:bodies" }

// events is the sharded pub/sub channel of the mailbox (no TTL: a channel).
func (k keys) events(tag string) string { return k.prefix + ":{" + tag + "}:events" }

// all returns the mailbox's keys in the order every script declares them:
// box, msgs, bodies, events.
func (k keys) all(tag string) []string {
	return []string{k.box(tag), k.msgs(tag), k.bodies(tag), k.events(tag)}
}

// guard is the layout guard's hash (guard.go; TTL 25 h from the last
// node's registration): one key of the fleet, outside every mailbox's slot.
func (k keys) guard() string { return k.prefix + ":layout-guard" }

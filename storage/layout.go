package storage

import (
	"fmt"
	"slices"
	"strings"
)

// A layout is one shape of what Mayfly writes in Redis: the keys, their
// types and TTLs, the fields of each hash and the form of every value. Every
// change to what a script or a command writes is a new layout with a new
// name, so that a fleet of nodes of two releases can agree on the one they
// write (docs/UPGRADING.md). A node reads every layout in Layouts; it writes
// one of them.
const (
	// Layout20261124 is what release 2026-11-24 (1e86987) reads and writes:
	// credential digests as 64 hex digits, messages in the bodies hash, the
	// creation windows and the active-inbox slots of a client in two keys
	// (a hash and a ZSET).
	Layout20261124 = "2026-11-24"
	// Layout20261125: 16-byte raw digests, messages in the box hash, a
	// client's creation windows and slots in one hash.
	Layout20261125 = "2026-11-25"
	// Layout20261126 is 2026-11-25 and each network's share of the
	// creations (ratelimit: a hash per IPv4 /24 or IPv6 /48 with its
	// creation windows and active slots).
	Layout20261126 = "2026-11-26"
	// Layout20261127 is 2026-11-26 and each message's envelope recipient:
	// a "to" member in its summary and message JSON (second, after the
	// id). It is the one layout that delivers mail for sub-addresses
	// (local+tag@domain, RFC 5233): a node writing an older one answers
	// them as unknown addresses, as releases before it do, so no message
	// is stored without the tag it arrived for.
	Layout20261127 = "2026-11-27"
	// Layout20261128 is 2026-11-27 with ratelimit's folds: a network's
	// share of the creations and every creation record of its clients in
	// one hash per network (ratelimit/scripts/fold.lua), instead of a hash
	// per client IP and one per network. The limiter follows the fleet's
	// layout, not the node's: while the fleet writes this one (no node of
	// an older release is live), every node counts in the folds, which
	// decide once they hold a whole day (LayoutGuard.FoldDecides).
	Layout20261128 = "2026-11-28"
	// LayoutFold is the first layout with the limiter's folds.
	LayoutFold = Layout20261128
	// LayoutCurrent is the newest layout this release writes, the default
	// on a fresh cluster.
	LayoutCurrent = Layout20261128
)

// Layouts lists every layout this release reads and may write, oldest
// first.
var Layouts = []string{Layout20261124, Layout20261125, Layout20261126, Layout20261127, Layout20261128}

// ValidLayout reports whether name is a layout of Layouts.
func ValidLayout(name string) bool {
	return slices.Contains(Layouts, name)
}

// WriteLayout is the layout this store writes.
func (s *Store) WriteLayout() string { return *s.layout.Load() }

// writesNov24 reports whether the store writes Layout20261124, the one
// layout whose writes differ on the storage side (the others differ in
// ratelimit's keys).
func (s *Store) writesNov24() bool { return s.WriteLayout() == Layout20261124 }

// Subaddressing reports whether the store delivers mail for sub-addresses
// (local+tag@domain): only while it writes Layout20261127 or later, which
// records each message's recipient.
func (s *Store) Subaddressing() bool { return s.WriteLayout() >= Layout20261127 }

// SetWriteLayout makes the store write layout name from its next write on;
// it refuses a name outside Layouts. What the store reads does not change.
func (s *Store) SetWriteLayout(name string) error {
	if !ValidLayout(name) {
		return fmt.Errorf("storage: unknown layout %q (known: %s)", name, strings.Join(Layouts, ", "))
	}
	s.layout.Store(&name)
	return nil
}

// writtenDigest is credential c's digest in the form the write layout
// stores: 16 raw bytes, or the 64 hex digits of layout 2026-11-24.
func (s *Store) writtenDigest(c Credential) string {
	cur, old := c.digestForms()
	if s.writesNov24() {
		return old
	}
	return cur
}

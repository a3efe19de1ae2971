package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSlotsOfBothLayouts: a client's active-inbox slots live in its ZSET
// (storage layout 2026-11-24, what that release counts) or in its hash
// (2026-11-25). The cap counts both, so a fleet that writes one layout and
// then the other never lets a client hold more than the cap; a slot is
// released and extended in whichever key holds it; the ZSET keeps the TTL
// that release gives it.
func TestSlotsOfBothLayouts(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{ActivePerClient: 4, CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 100})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const ip = "198.51.100.4"
	reserve := func(tag string) Decision {
		t.Helper()
		d, err := l.ReserveCreation(ctx, ip, tag, 10*time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	l.SetZSetSlots(true)
	for i := range 2 {
		if d := reserve(fmt.Sprintf("old%d", i)); !d.Allowed {
			t.Fatalf("reserve %d in the ZSET: %+v", i, d)
		}
	}
	zset := l.keys.active(ip)
	if n, _ := c.Do(ctx, c.B().Zcard().Key(zset).Build()).AsInt64(); n != 2 {
		t.Fatalf("ZSET holds %d slots, want 2", n)
	}
	if ttl, _ := c.Do(ctx, c.B().Pttl().Key(zset).Build()).AsInt64(); ttl <= 0 {
		t.Errorf("ZSET PTTL = %d, want its highest score", ttl)
	}
	l.SetZSetSlots(false)
	for i := range 2 {
		if d := reserve(fmt.Sprintf("new%d", i)); !d.Allowed {
			t.Fatalf("reserve %d in the hash: %+v", i, d)
		}
	}
	if d := reserve("over"); d.Allowed || d.Kind != KindActive {
		t.Fatalf("a fifth slot with 2 in the ZSET and 2 in the hash: %+v, want the active cap", d)
	}
	l.SetZSetSlots(true)
	if d := reserve("over"); d.Allowed || d.Kind != KindActive {
		t.Fatalf("a fifth slot, writing the ZSET: %+v, want the active cap", d)
	}
	// Extend and release a slot of each key.
	later := time.Now().Add(30 * time.Minute)
	if err := l.ExtendActive(ctx, ip, "old0", later); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Do(ctx, c.B().Zscore().Key(zset).Member("old0").Build()).AsInt64(); s != later.UnixMilli() {
		t.Errorf("extended ZSET slot scores %d, want %d", s, later.UnixMilli())
	}
	if ttl, _ := c.Do(ctx, c.B().Pttl().Key(zset).Build()).AsInt64(); ttl < int64(25*time.Minute/time.Millisecond) {
		t.Errorf("ZSET PTTL = %d ms after the extension, want it to follow its highest score", ttl)
	}
	if err := l.Release(ctx, ip, "old1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, ip, "new1"); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"a", "b"} {
		if d := reserve(tag); !d.Allowed {
			t.Fatalf("reserve %s after two releases: %+v", tag, d)
		}
	}
	if d := reserve("c"); d.Allowed {
		t.Fatalf("reserve past the cap again: %+v", d)
	}
}

// TestNetworkShare: with the networks' shares on, a creation the client's
// limits admit is counted against its network too; a network refusal
// releases the client's slot (it holds none afterwards), names its kind
// and, for a window, its reset; a network's share is never below one
// client's allowance.
func TestNetworkShare(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{CreatePerMinute: 2, ActivePerClient: 2, NetCreatePerMinute: 3, NetActive: 100})
	l.SetNetworkShares(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	roomInWindow(t, c, minute, 10*time.Second)
	reserve := func(client, tag string) Decision {
		t.Helper()
		d, err := l.ReserveCreation(ctx, client, tag, 10*time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for i, client := range []string{"2001:db8:7:1::/64", "2001:db8:7:2::/64", "2001:db8:7:3::/64"} {
		if d := reserve(client, fmt.Sprintf("t%d", i)); !d.Allowed {
			t.Fatalf("creation %d of the /48: %+v", i, d)
		}
	}
	d := reserve("2001:db8:7:4::/64", "t4")
	if d.Allowed || d.Kind != KindNetCreation || d.RetryAfter <= 0 {
		t.Fatalf("a fourth creation of the /48 in a minute: %+v, want net_creation with a reset", d)
	}
	if n, _ := c.Do(ctx, c.B().Hlen().Key(l.keys.creation("2001:db8:7:4::/64")).Build()).AsInt64(); n != 6 {
		t.Errorf("the refused client's hash has %d fields, want its 6 window fields and no slot", n)
	}
	if d := reserve("2001:db8:8:1::/64", "other"); !d.Allowed {
		t.Fatalf("another /48: %+v", d)
	}
	l.SetNetworkShares(false)
	if d := reserve("2001:db8:7:5::/64", "t5"); !d.Allowed {
		t.Fatalf("shares off: %+v", d)
	}
	for _, tc := range []struct{ client, net string }{
		{"198.51.100.7", "198.51.100.0/24"}, {"2001:db8:1:2::/64", "2001:db8:1::/48"}, {"unknown", ""}, {"", ""},
	} {
		if got := NetworkOf(tc.client); got != tc.net {
			t.Errorf("NetworkOf(%q) = %q, want %q", tc.client, got, tc.net)
		}
	}
	if got := (Config{CreatePerMinute: 500, NetCreatePerMinute: 60}).withDefaults().NetCreatePerMinute; got != 500 {
		t.Errorf("a network's minute share under one client's = %d, want raised to 500", got)
	}
}

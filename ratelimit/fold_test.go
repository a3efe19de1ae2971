package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// foldLimiter is newLimiter with the networks' shares on and the folds
// deciding (storage layout 2026-11-28 on a fresh cluster).
func foldLimiter(t *testing.T, cfg Config) (*Limiter, rueidis.Client) {
	t.Helper()
	l, c := newLimiter(t, cfg)
	l.SetNetworkShares(true)
	l.SetFold(true, time.Time{})
	return l, c
}

// foldField reads one field of client's fold.
func foldField(t *testing.T, c rueidis.Client, l *Limiter, client, field string) string {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Hget().Key(l.keys.fold(client)).Field(field).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return v
}

// TestFoldLimits: with the folds deciding, every creation limit of a client
// holds as in the older keys (TestCreationPerMinute, TestActiveCap…),
// counted in one key per network and none per client.
func TestFoldLimits(t *testing.T) {
	t.Parallel()
	l, c := foldLimiter(t, Config{CreatePerMinute: 5, CreatePerHour: 100, CreatePerDay: 100})
	ctx := context.Background()
	const ip = "192.0.2.10"
	roomInWindow(t, c, minute, 10*time.Second)
	for i := range 2 { // invalid attempts count
		if got, want := reserve(t, l, ip, "", 0, false), (Decision{}); got != want {
			t.Fatalf("invalid attempt %d: %+v, want %+v", i+1, got, want)
		}
	}
	for i := range 3 {
		if d := reserve(t, l, ip, fmt.Sprint("mb", i), 10*minute, true); !d.Allowed {
			t.Fatalf("valid attempt %d: %+v", i+1, d)
		}
	}
	before := serverNow(t, c)
	d := reserve(t, l, ip, "mb9", 10*minute, true)
	after := serverNow(t, c)
	if d.Allowed || d.Kind != KindCreation || d.Window != "minute" {
		t.Fatalf("6th attempt: %+v, want refused by the minute window", d)
	}
	if lo, hi := retryBounds(before, after, minute); d.RetryAfter < lo || d.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v, want in [%v, %v]", d.RetryAfter, lo, hi)
	}
	if rec := foldField(t, c, l, ip, "c:"+ip); !strings.HasSuffix(rec, " 6 6 6 mb0 mb1 mb2") {
		t.Errorf("client record %q, want 6 attempts in each window and the 3 slots", rec)
	}
	if rec := foldField(t, c, l, ip, "n"); !strings.HasSuffix(rec, " 3 3 3") {
		t.Errorf("network record %q, want the 3 creations the client's limits admitted", rec)
	}
	for _, k := range []string{l.keys.creation(ip), l.keys.network(NetworkOf(ip))} {
		if n, _ := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); n != 0 {
			t.Errorf("%s exists: the fold alone is written", k)
		}
	}
	if ttl, _ := c.Do(ctx, c.B().Pttl().Key(l.keys.fold(ip)).Build()).AsInt64(); ttl <= 0 || ttl > int64(day/time.Millisecond) {
		t.Errorf("fold PTTL %d ms, want to the end of the day window", ttl)
	}

	// The active cap, a release, an extension that must not resurrect.
	act, _ := foldLimiter(t, Config{CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 100})
	checkActiveCap(t, act, "192.0.2.40", "192.0.2.41")
}

// TestFoldNetworkShare: TestNetworkShare with the folds deciding, and the
// network's active share.
func TestFoldNetworkShare(t *testing.T) {
	t.Parallel()
	l, c := foldLimiter(t, Config{CreatePerMinute: 2, ActivePerClient: 2, NetCreatePerMinute: 3, NetActive: 100})
	roomInWindow(t, c, minute, 10*time.Second)
	for i, client := range []string{"2001:db8:7:1::/64", "2001:db8:7:2::/64", "2001:db8:7:3::/64"} {
		if d := reserve(t, l, client, fmt.Sprintf("t%d", i), 10*minute, true); !d.Allowed {
			t.Fatalf("creation %d of the /48: %+v", i, d)
		}
	}
	d := reserve(t, l, "2001:db8:7:4::/64", "t4", 10*minute, true)
	if d.Allowed || d.Kind != KindNetCreation || d.RetryAfter <= 0 || d.Window != "minute" {
		t.Fatalf("a fourth creation of the /48 in a minute: %+v, want net_creation with a reset", d)
	}
	if rec := foldField(t, c, l, "2001:db8:7:4::/64", "c:2001:db8:7:4::/64"); strings.Count(rec, " ") != 3 {
		t.Errorf("the refused client's record %q, want its windows and no slot", rec)
	}
	if d := reserve(t, l, "2001:db8:8:1::/64", "other", 10*minute, true); !d.Allowed {
		t.Fatalf("another /48: %+v", d)
	}

	act, _ := foldLimiter(t, Config{CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 100, ActivePerClient: 2, NetActive: 3})
	for i := range 3 {
		if d := reserve(t, act, fmt.Sprintf("198.51.100.%d", i), "a"+fmt.Sprint(i), 10*minute, true); !d.Allowed {
			t.Fatalf("slot %d of the /24: %+v", i, d)
		}
	}
	if got, want := reserve(t, act, "198.51.100.9", "a9", 10*minute, true), (Decision{Kind: KindNetActive}); got != want {
		t.Fatalf("a fourth live inbox of the /24: %+v, want %+v", got, want)
	}
	if err := act.Release(context.Background(), "198.51.100.1", "a1"); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, act, "198.51.100.9", "a9", 10*minute, true); !d.Allowed {
		t.Fatalf("after a release in the /24: %+v", d)
	}
	// A client key without a network has a fold of its own.
	if d := reserve(t, act, "unknown", "u", 10*minute, true); !d.Allowed {
		t.Fatalf("client without a network: %+v", d)
	}
}

// TestFoldConcurrent: two nodes' limiters creating for one client at once
// never admit more than its limits, in the fold as in the older keys.
func TestFoldConcurrent(t *testing.T) {
	t.Parallel()
	cfg := Config{CreatePerMinute: 1000, CreatePerHour: 1000, CreatePerDay: 7, ActivePerClient: 1000}
	a, c := foldLimiter(t, cfg)
	b := New(c, a.Config())
	b.SetNetworkShares(true)
	b.SetFold(true, time.Time{})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.ReserveCreation(context.Background(), "203.0.113.5", fmt.Sprint("c", i), 10*time.Minute, true)
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 7 {
		t.Fatalf("admitted %d of 40 concurrent attempts, want the day's 7", got)
	}
}

// TestFoldMirrorsThenDecides: while the folds mirror, the older keys
// decide and the fold counts the same; once it decides, a client's day
// and live inboxes carry over: nothing counted before is forgotten, so
// no limit is passed across the switch.
func TestFoldMirrorsThenDecides(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 6, ActivePerClient: 3, NetActive: 4})
	l.SetNetworkShares(true)
	l.SetFold(true, time.Now().Add(time.Hour)) // mirrors
	ctx := context.Background()
	const ip = "192.0.2.60"
	reserve(t, l, ip, "", 0, false) // an invalid attempt counts
	for i := range 3 {
		if d := reserve(t, l, ip, fmt.Sprint("m", i), 10*minute, true); !d.Allowed {
			t.Fatalf("mirrored reservation %d: %+v", i, d)
		}
	}
	if got, want := reserve(t, l, ip, "m3", 10*minute, true), (Decision{Kind: KindActive}); got != want {
		t.Fatalf("past the cap while mirroring: %+v, want %+v", got, want)
	}
	if err := l.Release(ctx, ip, "m0"); err != nil {
		t.Fatal(err)
	}
	if err := l.ExtendActive(ctx, ip, "m1", time.Now().Add(40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// While mirroring every layout's creation keys are written, and
	// CreationKeys names each.
	for _, k := range CreationKeys(l.cfg.KeyPrefix, ip) {
		if n, _ := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); n != 1 {
			t.Errorf("%s (CreationKeys) is not written while mirroring", k)
		}
	}
	if rec := foldField(t, c, l, ip, "n"); !strings.HasSuffix(rec, " 3 3 3") {
		t.Errorf("mirrored network record %q, want the 3 creations the client's limits admitted", rec)
	}
	if rec := foldField(t, c, l, ip, "c:"+ip); !strings.HasSuffix(rec, " 5 5 5 m1 m2") {
		t.Errorf("mirrored client record %q, want 5 attempts and the live slots m1 m2", rec)
	}
	l.SetFold(true, time.Now()) // decides
	// 5 attempts counted, 2 live slots (m1, m2): one more is admitted
	// (the day's 6th), then the day refuses.
	if d := reserve(t, l, ip, "f0", 10*minute, true); !d.Allowed {
		t.Fatalf("first attempt in the fold: %+v", d)
	}
	if d := reserve(t, l, ip, "f1", 10*minute, true); d.Allowed || d.Kind != KindCreation || d.Window != "day" {
		t.Fatalf("the day's 7th attempt: %+v, want refused by the day window", d)
	}
	s := foldField(t, c, l, ip, "s")
	if strings.Contains(s, "m0 ") || !strings.Contains(s, "m1 ") || !strings.Contains(s, "f0 ") {
		t.Errorf("network slots %q, want m1, m2 and f0, not the released m0", s)
	}
	// The extension was mirrored: m1 outlives the 10 minutes it was made for.
	exp, order, _ := parseSlotsForTest(s)
	if len(order) != 3 || exp["m1"] < time.Now().Add(30*time.Minute).UnixMilli() {
		t.Errorf("slots %v, want 3 with m1 extended to 40 minutes", exp)
	}
}

// parseSlotsForTest reads a fold's s field as fold.lua's parse_slots does.
func parseSlotsForTest(s string) (map[string]int64, []string, error) {
	f := strings.Fields(s)
	exp := map[string]int64{}
	var order []string
	for i := 0; i+1 < len(f); i += 2 {
		var e int64
		if _, err := fmt.Sscan(f[i+1], &e); err != nil {
			return nil, nil, err
		}
		exp[f[i]] = e
		order = append(order, f[i])
	}
	return exp, order, nil
}

// TestFoldPrunesOldClients: a fold keeps no client record of an earlier
// day without a live slot past its first creation of a day, so a network
// busy every day does not keep every client it ever had.
func TestFoldPrunesOldClients(t *testing.T) {
	t.Parallel()
	l, c := foldLimiter(t, Config{})
	ctx := context.Background()
	key := l.keys.fold("198.51.100.1")
	now := serverNow(t, c)
	yesterday := now.Add(-day).UnixMilli() / 60000
	old := fmt.Sprintf("%d 1 1 1", yesterday)
	if err := c.Do(ctx, c.B().Hset().Key(key).FieldValue().
		FieldValue("c:198.51.100.2", old).
		FieldValue("c:198.51.100.3", old+" live").
		FieldValue("s", fmt.Sprintf("live %d", now.Add(time.Hour).UnixMilli())).
		FieldValue("d", fmt.Sprint(yesterday/1440)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, l, "198.51.100.1", "new", 10*minute, true); !d.Allowed {
		t.Fatalf("reserve: %+v", d)
	}
	if v := foldField(t, c, l, "198.51.100.1", "c:198.51.100.2"); v != "" {
		t.Errorf("yesterday's record without a slot is still there: %q", v)
	}
	if v := foldField(t, c, l, "198.51.100.1", "c:198.51.100.3"); v != old+" live" {
		t.Errorf("yesterday's record with a live slot = %q, want kept", v)
	}
}

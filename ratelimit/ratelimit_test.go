package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

const (
	minute = time.Minute
	hour   = time.Hour
	day    = 24 * time.Hour
)

// newLimiter returns a Limiter on the test cluster under a prefix of its own.
func newLimiter(t testing.TB, cfg Config) (*Limiter, rueidis.Client) {
	t.Helper()
	c := storagetest.Client(t)
	cfg.KeyPrefix = storagetest.Prefix(t)
	return New(c, cfg), c
}

// serverNow reads the Redis server clock the scripts use.
func serverNow(t testing.TB, c rueidis.Client) time.Time {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return time.Unix(v[0], v[1]*1000)
}

// untilReset is how long after now the fixed window of length span ends.
func untilReset(now time.Time, span time.Duration) time.Duration {
	return span - time.Duration(now.UnixNano()%int64(span))
}

// startWindow sleeps until the next window of length span begins on the
// server clock, so a test owns a whole window and cannot straddle two.
func startWindow(t testing.TB, c rueidis.Client, span time.Duration) {
	t.Helper()
	time.Sleep(untilReset(serverNow(t, c), span) + 5*time.Millisecond)
}

// roomInWindow makes sure at least need is left of the current window of
// length span, waiting for the next one if not.
func roomInWindow(t testing.TB, c rueidis.Client, span, need time.Duration) {
	t.Helper()
	if untilReset(serverNow(t, c), span) < need {
		startWindow(t, c, span)
	}
}

// retryBounds is the RetryAfter a call made between before and after must
// report for a window of length span: time to its reset, rounded up to seconds.
func retryBounds(before, after time.Time, span time.Duration) (lo, hi time.Duration) {
	up := func(d time.Duration) time.Duration { return (d + time.Second - 1).Truncate(time.Second) }
	return up(untilReset(after, span)), up(untilReset(before, span))
}

func TestDefaultsAreSpec(t *testing.T) {
	got := New(nil, Config{}).Config()
	want := Config{
		KeyPrefix:             "mf",
		RequestsPerSecond:     8,
		CreatePerMinute:       5,
		CreatePerHour:         10,
		CreatePerDay:          20,
		ActivePerClient:       5,
		GlobalCreatePerMinute: 5000,
		NetCreatePerMinute:    60,
		NetCreatePerHour:      600,
		NetCreatePerDay:       2000,
		NetActive:             300,
	}
	if got != want {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
	set := Config{KeyPrefix: "x", RequestsPerSecond: 1, CreatePerMinute: 2, CreatePerHour: 3,
		CreatePerDay: 4, ActivePerClient: 5, GlobalCreatePerMinute: 6,
		NetCreatePerMinute: 7, NetCreatePerHour: 8, NetCreatePerDay: 9, NetActive: 10}
	if got := New(nil, set).Config(); got != set {
		t.Fatalf("Config() = %+v, want the values set %+v", got, set)
	}
}

func TestAllowRequestEightPerSecond(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx := context.Background()
	startWindow(t, c, time.Second)
	for i := range 8 {
		d, err := l.AllowRequest(ctx, "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d, (Decision{Allowed: true}); got != want {
			t.Fatalf("request %d: %+v, want %+v", i+1, got, want)
		}
	}
	d, err := l.AllowRequest(ctx, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d, (Decision{Kind: KindRequest, RetryAfter: time.Second}); got != want {
		t.Fatalf("request 9: %+v, want %+v", got, want)
	}
	// Another client has a window of its own.
	if d, err := l.AllowRequest(ctx, "192.0.2.2"); err != nil || !d.Allowed {
		t.Fatalf("other client: %+v, %v; want allowed", d, err)
	}
	startWindow(t, c, time.Second)
	if d, err := l.AllowRequest(ctx, "192.0.2.1"); err != nil || !d.Allowed {
		t.Fatalf("next second: %+v, %v; want allowed", d, err)
	}
}

func TestAllowRequestConcurrent(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	startWindow(t, c, time.Second)
	before := serverNow(t, c)
	allowed := race(t, 50, func() (Decision, error) {
		return l.AllowRequest(context.Background(), "2001:db8::/64")
	})
	if after := serverNow(t, c); after.Unix() != before.Unix() {
		t.Fatalf("calls spanned seconds %d..%d; the count is meaningless", before.Unix(), after.Unix())
	}
	if got, want := allowed, 8; got != want {
		t.Fatalf("50 racing requests admitted %d, want %d", got, want)
	}
}

// race runs f n times at once and returns how many were allowed.
func race(t *testing.T, n int, f func() (Decision, error)) int {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			d, err := f()
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(allowed.Load())
}

func TestAllowRule(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx := context.Background()
	r := Rule{Name: "smtp-conn", Limit: 3, Window: 10 * time.Second}
	roomInWindow(t, c, r.Window, 2*time.Second)
	for i := range 3 {
		if d, err := l.Allow(ctx, r, "198.51.100.7"); err != nil || !d.Allowed {
			t.Fatalf("hit %d: %+v, %v; want allowed", i+1, d, err)
		}
	}
	// A rule of another name counts apart.
	other := Rule{Name: "smtp-rcpt", Limit: 1, Window: 10 * time.Second}
	if d, err := l.Allow(ctx, other, "198.51.100.7"); err != nil || !d.Allowed {
		t.Fatalf("other rule: %+v, %v; want allowed", d, err)
	}
	before := serverNow(t, c)
	d, err := l.Allow(ctx, r, "198.51.100.7")
	after := serverNow(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Kind, Kind("smtp-conn"); d.Allowed || got != want {
		t.Fatalf("hit 4: %+v, want refused with Kind %q", d, want)
	}
	if lo, hi := retryBounds(before, after, r.Window); d.RetryAfter < lo || d.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v, want in [%v, %v]", d.RetryAfter, lo, hi)
	}
}

// TestAllowAllOneTrip counts two rules in one call: each decides on its own
// count, and each is counted whatever the other decides.
func TestAllowAllOneTrip(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx := context.Background()
	conn := Rule{Name: "conn", Limit: 2, Window: 10 * time.Second}
	mail := Rule{Name: "mail", Limit: 1, Window: 10 * time.Second}
	roomInWindow(t, c, conn.Window, 2*time.Second)
	want := [][2]bool{{true, true}, {true, false}, {false, false}}
	for i, w := range want {
		ds, err := l.AllowAll(ctx, "198.51.100.9", conn, mail)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 || ds[0].Allowed != w[0] || ds[1].Allowed != w[1] {
			t.Fatalf("call %d: %+v, want allowed %v", i+1, ds, w)
		}
	}
	// Allow on one of them sees the count AllowAll left.
	if d, err := l.Allow(ctx, mail, "198.51.100.9"); err != nil || d.Allowed || d.Kind != "mail" {
		t.Fatalf("Allow(mail) after AllowAll: %+v, %v; want refused", d, err)
	}
	if _, err := l.AllowAll(ctx, "198.51.100.9", conn, Rule{Name: "request", Limit: 1, Window: time.Second}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a rule named like the request counter: %v, want ErrInvalid", err)
	}
}

// TestAllowRequestSkewedNodes pins what the node-clock windows do when two
// nodes' clocks disagree by δ = 300 ms: a window's count is shared by both
// (the key names the window), so no window admits more than 8; what moves is
// where each node puts the edge, so within δ of an edge a client spread over
// both can pass 8 more: the documented bound.
func TestAllowRequestSkewedNodes(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ahead := New(c, l.cfg)
	const skew = 300 * time.Millisecond
	base := time.Now().Truncate(time.Second).Add(-time.Minute) // a fixed past second: keys of their own
	at := func(lim *Limiter, tm time.Time) { lim.now = func() time.Time { return tm } }
	ctx := context.Background()
	pass := func(lim *Limiter, n int) int {
		t.Helper()
		ok := 0
		for range n {
			d, err := lim.AllowRequest(ctx, "192.0.2.99")
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				ok++
			}
		}
		return ok
	}
	// True time base+0.5 s: both nodes are inside second `base`; one count.
	at(l, base.Add(500*time.Millisecond))
	at(ahead, base.Add(500*time.Millisecond+skew))
	if got := pass(l, 5) + pass(ahead, 5); got != 8 {
		t.Fatalf("mid-window, both nodes: %d passed, want 8 (one shared count)", got)
	}
	// True time base+0.8 s: the node ahead is already in the next second and
	// admits 8 more there; the other still refuses.
	at(l, base.Add(800*time.Millisecond))
	at(ahead, base.Add(800*time.Millisecond+skew))
	if got := pass(l, 3); got != 0 {
		t.Fatalf("lagging node at the edge: %d passed, want 0", got)
	}
	if got := pass(ahead, 10); got != 8 {
		t.Fatalf("leading node past the edge: %d passed, want 8 (the next window)", got)
	}
	// True time base+1.1 s: both are in the next second, which is full.
	at(l, base.Add(1100*time.Millisecond))
	at(ahead, base.Add(1100*time.Millisecond+skew))
	if got := pass(l, 3) + pass(ahead, 3); got != 0 {
		t.Fatalf("next window on both nodes: %d passed, want 0 (its 8 went early)", got)
	}
}

func TestAllowRuleInvalid(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	for _, r := range []Rule{
		{Name: "", Limit: 1, Window: time.Second},
		{Name: "x", Limit: 0, Window: time.Second},
		{Name: "x", Limit: -1, Window: time.Second},
		{Name: "x", Limit: 1, Window: 0},
		{Name: "x", Limit: 1, Window: time.Microsecond},
	} {
		if _, err := l.Allow(context.Background(), r, "192.0.2.1"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Allow(%+v) error = %v, want ErrInvalid", r, err)
		}
	}
}

// reserve is ReserveCreation that fails the test on error.
func reserve(t *testing.T, l *Limiter, client, mailbox string, life time.Duration, valid bool) Decision {
	t.Helper()
	d, err := l.ReserveCreation(context.Background(), client, mailbox, life, valid)
	if err != nil {
		t.Fatalf("ReserveCreation(%s, %s): %v", client, mailbox, err)
	}
	return d
}

func TestCreationPerMinute(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	const ip = "192.0.2.10"
	roomInWindow(t, c, minute, 10*time.Second)
	// Invalid attempts count: 2 invalid + 3 valid use up the minute's 5.
	for i := range 2 {
		if got, want := reserve(t, l, ip, "", 0, false), (Decision{}); got != want {
			t.Fatalf("invalid attempt %d: %+v, want %+v", i+1, got, want)
		}
	}
	for i := range 3 {
		if got, want := reserve(t, l, ip, fmt.Sprint("mb", i), 10*minute, true), (Decision{Allowed: true}); got != want {
			t.Fatalf("valid attempt %d: %+v, want %+v", i+1, got, want)
		}
	}
	before := serverNow(t, c)
	d := reserve(t, l, ip, "mb9", 10*minute, true)
	after := serverNow(t, c)
	if d.Allowed || d.Kind != KindCreation {
		t.Fatalf("6th attempt: %+v, want refused with Kind %q", d, KindCreation)
	}
	if lo, hi := retryBounds(before, after, minute); d.RetryAfter < lo || d.RetryAfter > hi || d.RetryAfter > minute {
		t.Fatalf("RetryAfter = %v, want in [%v, %v]", d.RetryAfter, lo, hi)
	}
	// An invalid attempt stays a bad request even when the window is full.
	if got, want := reserve(t, l, ip, "", 0, false), (Decision{}); got != want {
		t.Fatalf("invalid attempt over the limit: %+v, want %+v", got, want)
	}
	// Refused attempts reserved nothing: only the 3 admitted hold slots.
	if got, want := activeCount(t, c, l, ip), int64(3); got != want {
		t.Fatalf("active slots = %d, want %d", got, want)
	}
}

// activeCount reads how many slots (a:<mailbox> fields) the client's hash
// holds.
func activeCount(t *testing.T, c rueidis.Client, l *Limiter, client string) int64 {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(l.keys.creation(client)).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for f := range m {
		if strings.HasPrefix(f, "a:") {
			n++
		}
	}
	return n
}

func TestCreationWindows(t *testing.T) {
	t.Parallel()
	const high = 1000
	for _, tc := range []struct {
		name       string
		cfg        Config
		admitted   int
		blockedFor time.Duration // the window whose reset RetryAfter reports
		window     string        // and its name in the Decision
	}{
		{"minute", Config{CreatePerMinute: 2, CreatePerHour: high, CreatePerDay: high}, 2, minute, "minute"},
		{"hour", Config{CreatePerMinute: high, CreatePerHour: 3, CreatePerDay: high}, 3, hour, "hour"},
		{"day", Config{CreatePerMinute: high, CreatePerHour: high, CreatePerDay: 3}, 3, day, "day"},
		{"minute and hour: the longer wait", Config{CreatePerMinute: 2, CreatePerHour: 2, CreatePerDay: high}, 2, hour, "hour"},
		{"minute and day: the longer wait", Config{CreatePerMinute: 2, CreatePerHour: high, CreatePerDay: 2}, 2, day, "day"},
		{"all three: the longest wait", Config{CreatePerMinute: 1, CreatePerHour: 1, CreatePerDay: 1}, 1, day, "day"},
	} {
		for _, fold := range []bool{false, true} {
			name := tc.name
			if fold {
				name += ", in a fold" // storage layout 2026-11-28
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := tc.cfg // both subtests of tc run at once: a copy each
				cfg.ActivePerClient = high
				l, c := newLimiter(t, cfg)
				l.SetNetworkShares(fold)
				l.SetFold(fold, time.Time{})
				checkWindows(t, l, c, tc.admitted, tc.blockedFor, tc.window)
			})
		}
	}
}

// checkWindows: the client 192.0.2.20's first admitted attempts pass, the
// next are refused by window with the reset of a window of length span.
func checkWindows(t *testing.T, l *Limiter, c rueidis.Client, admitted int, span time.Duration, window string) {
	t.Helper()
	const ip = "192.0.2.20"
	roomInWindow(t, c, minute, 5*time.Second)
	for i := range admitted {
		if d := reserve(t, l, ip, fmt.Sprint("mb", i), 10*minute, true); !d.Allowed {
			t.Fatalf("attempt %d: %+v, want allowed", i+1, d)
		}
	}
	for i := range 2 { // refused attempts stay refused
		before := serverNow(t, c)
		d := reserve(t, l, ip, "over", 10*minute, true)
		after := serverNow(t, c)
		if d.Allowed || d.Kind != KindCreation {
			t.Fatalf("attempt %d: %+v, want refused with Kind %q", admitted+i+1, d, KindCreation)
		}
		if lo, hi := retryBounds(before, after, span); d.RetryAfter < lo || d.RetryAfter > hi {
			t.Fatalf("RetryAfter = %v, want in [%v, %v]", d.RetryAfter, lo, hi)
		}
		if d.Window != window {
			t.Fatalf("Window = %q, want %q", d.Window, window)
		}
	}
}

// TestCreationRefusedAttemptsCount shows attempts refused by one window still
// count in the others: the spec counts failed attempts.
func TestCreationRefusedAttemptsCount(t *testing.T) {
	t.Parallel()
	strict, c := newLimiter(t, Config{CreatePerMinute: 2, CreatePerHour: 100, CreatePerDay: 100, ActivePerClient: 100})
	const ip = "192.0.2.30"
	roomInWindow(t, c, hour, 10*time.Second)
	for i := range 5 { // 2 admitted, 3 refused by the minute window
		reserve(t, strict, ip, fmt.Sprint("mb", i), 10*minute, true)
	}
	// Same keys, an hour window of 5: the 5 attempts above used it up.
	cfg := strict.Config()
	cfg.CreatePerMinute, cfg.CreatePerHour = 100, 5
	hourly := New(c, cfg)
	before := serverNow(t, c)
	d := reserve(t, hourly, ip, "mb5", 10*minute, true)
	after := serverNow(t, c)
	if d.Allowed || d.Kind != KindCreation {
		t.Fatalf("6th attempt: %+v, want refused with Kind %q", d, KindCreation)
	}
	if lo, hi := retryBounds(before, after, hour); d.RetryAfter < lo || d.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v, want the hour window's reset in [%v, %v]", d.RetryAfter, lo, hi)
	}
}

func TestActiveCap(t *testing.T) {
	t.Parallel()
	l, _ := newLimiter(t, Config{CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 100})
	checkActiveCap(t, l, "192.0.2.40", "192.0.2.41")
}

// checkActiveCap: the client ip holds 5 slots at most, another client is
// not affected, a released slot is free again and an extension does not
// bring it back.
func checkActiveCap(t *testing.T, l *Limiter, ip, other string) {
	t.Helper()
	for i := range 5 {
		if d := reserve(t, l, ip, fmt.Sprint("mb", i), 10*minute, true); !d.Allowed {
			t.Fatalf("reservation %d: %+v, want allowed", i+1, d)
		}
	}
	if got, want := reserve(t, l, ip, "mb5", 10*minute, true), (Decision{Kind: KindActive}); got != want {
		t.Fatalf("6th reservation: %+v, want %+v", got, want)
	}
	// Another client is not affected.
	if d := reserve(t, l, other, "other", 10*minute, true); !d.Allowed {
		t.Fatalf("other client: %+v, want allowed", d)
	}
	ctx := context.Background()
	if err := l.Release(ctx, ip, "mb0"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, ip, "never-reserved"); err != nil {
		t.Fatalf("Release of an unknown mailbox: %v", err)
	}
	// Extending a released slot must not bring it back.
	if err := l.ExtendActive(ctx, ip, "mb0", time.Now().Add(hour)); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, l, ip, "mb5", 10*minute, true); !d.Allowed {
		t.Fatalf("after Release: %+v, want allowed", d)
	}
	if got, want := reserve(t, l, ip, "mb6", 10*minute, true), (Decision{Kind: KindActive}); got != want {
		t.Fatalf("after refilling: %+v, want %+v", got, want)
	}
}

func TestActiveExpiry(t *testing.T) {
	t.Parallel()
	l, _ := newLimiter(t, Config{CreatePerMinute: 100, CreatePerHour: 100, CreatePerDay: 100})
	ctx := context.Background()
	const (
		expiring = "192.0.2.50"
		extended = "192.0.2.51"
		short    = 2 * time.Second // the checks before its expiry take a few round trips
	)
	// Both clients: four long slots plus one short-lived one, taken last so
	// it cannot expire before the checks; the extended client moves the
	// short slot's expiry an hour on.
	for _, ip := range []string{expiring, extended} {
		for i := range 4 {
			reserve(t, l, ip, fmt.Sprint("long", i), 10*minute, true)
		}
		reserve(t, l, ip, "short", short, true)
		if ip == extended {
			if err := l.ExtendActive(ctx, ip, "short", time.Now().Add(hour)); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := reserve(t, l, ip, "more", 10*minute, true), (Decision{Kind: KindActive}); got != want {
			t.Fatalf("%s before expiry: %+v, want %+v", ip, got, want)
		}
	}
	time.Sleep(short + 100*time.Millisecond)
	if d := reserve(t, l, expiring, "more", 10*minute, true); !d.Allowed {
		t.Fatalf("after the short slot expired: %+v, want allowed", d)
	}
	if got, want := reserve(t, l, extended, "more", 10*minute, true), (Decision{Kind: KindActive}); got != want {
		t.Fatalf("after extension: %+v, want %+v (the extended slot still counts)", got, want)
	}
}

func TestReserveInvalidArguments(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	for _, tc := range []struct {
		mailbox string
		life    time.Duration
	}{{"", time.Minute}, {"mb", 0}, {"mb", -time.Second}} {
		if _, err := l.ReserveCreation(context.Background(), "192.0.2.1", tc.mailbox, tc.life, true); !errors.Is(err, ErrInvalid) {
			t.Errorf("ReserveCreation(%q, %v) error = %v, want ErrInvalid", tc.mailbox, tc.life, err)
		}
	}
}

func TestGlobalCreationConcurrent(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{GlobalCreatePerMinute: 20})
	roomInWindow(t, c, minute, 10*time.Second)
	if got, want := race(t, 100, func() (Decision, error) {
		return l.AllowGlobalCreation(context.Background())
	}), 20; got != want {
		t.Fatalf("100 racing creations admitted %d, want %d", got, want)
	}
	before := serverNow(t, c)
	d, err := l.AllowGlobalCreation(context.Background())
	after := serverNow(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Kind != KindGlobal {
		t.Fatalf("over the cap: %+v, want refused with Kind %q", d, KindGlobal)
	}
	if lo, hi := retryBounds(before, after, minute); d.RetryAfter < lo || d.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v, want in [%v, %v]", d.RetryAfter, lo, hi)
	}
}

func TestGlobalCreationSpecCap(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	roomInWindow(t, c, minute, 15*time.Second)
	start := time.Now()
	const calls, workers = 5100, 32
	var allowed, refused atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= calls {
				d, err := l.AllowGlobalCreation(context.Background())
				switch {
				case err != nil:
					errs <- err
					return
				case d.Allowed:
					allowed.Add(1)
				case d.Kind == KindGlobal:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d calls in %v", calls, time.Since(start))
	if got, want := allowed.Load(), int64(5000); got != want {
		t.Fatalf("admitted %d of %d, want %d", got, calls, want)
	}
	if got, want := refused.Load(), int64(100); got != want {
		t.Fatalf("refused %d with Kind global, want %d", got, want)
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
	} {
		if got := ClientKey(netip.MustParseAddr(tc.in)); got != tc.want {
			t.Errorf("ClientKey(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The in-memory caps key a client and its network the way the limits do.
func TestClientAndNetworkPrefix(t *testing.T) {
	for _, tc := range []struct{ in, client, network string }{
		{"192.0.2.1", "192.0.2.1/32", "192.0.2.0/24"},
		{"::ffff:192.0.2.200", "192.0.2.200/32", "192.0.2.0/24"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"2001:db8:1:ffff::1", "2001:db8:1:ffff::/64", "2001:db8:1::/48"},
		{"fe80::1%eth0", "fe80::/64", "fe80::/48"},
	} {
		ip := netip.MustParseAddr(tc.in)
		if got := ClientPrefix(ip).String(); got != tc.client {
			t.Errorf("ClientPrefix(%s) = %q, want %q", tc.in, got, tc.client)
		}
		if got := NetworkPrefix(ip).String(); got != tc.network {
			t.Errorf("NetworkPrefix(%s) = %q, want %q", tc.in, got, tc.network)
		}
	}
	if ClientPrefix(netip.Addr{}).IsValid() || NetworkPrefix(netip.Addr{}).IsValid() {
		t.Error("an invalid address has a valid prefix")
	}
}

// TestKeysExpire runs every operation and checks that each key it leaves has
// a TTL, and that the TTLs end where the windows and slots do.
func TestKeysExpire(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx := context.Background()
	const ip = "192.0.2.60"
	check := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		for _, k := range storagetest.Leftovers(t, l.cfg.KeyPrefix) {
			ms, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if ms == -1 { // -2: expired since the scan, which is fine
				t.Fatalf("after %s: key %s has no TTL", op, k)
			}
		}
	}
	expireAt := func(key string) time.Time {
		t.Helper()
		ms, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(ms)
	}
	// The global key ends with its minute, and the creation key's expected
	// expiry is the end of the day read below: the test owns its minute.
	roomInWindow(t, c, minute, 5*time.Second)
	roomInWindow(t, c, time.Second, 500*time.Millisecond)
	now := serverNow(t, c)
	node := time.Now() // the native windows' clock, held still: their keys are known
	l.now = func() time.Time { return node }
	_, err := l.AllowRequest(ctx, ip)
	check("AllowRequest", err)
	// Two windows from the hit: the node clock (this machine's) and the
	// server's agree here, within the test's few ms.
	if got, lo, hi := expireAt(l.keys.window("request", ip, node.Unix())), now.Add(2*time.Second), serverNow(t, c).Add(2*time.Second); got.Before(lo.Truncate(time.Millisecond)) || got.After(hi) {
		t.Errorf("request key expires at %v, want two seconds after the hit, in [%v, %v]", got, lo, hi)
	}
	_, err = l.Allow(ctx, Rule{Name: "conn", Limit: 1, Window: time.Minute}, ip)
	check("Allow", err)
	_, err = l.Allow(ctx, Rule{Name: "conn", Limit: 1, Window: time.Minute}, ip)
	check("Allow refused", err)
	_, err = l.ReserveCreation(ctx, ip, "", 0, false)
	check("ReserveCreation invalid", err)
	if got, want := expireAt(l.keys.creation(ip)), now.Truncate(day).Add(day); !got.Equal(want) {
		t.Errorf("creation key expires at %v, want the end of the day window %v", got, want)
	}
	// The slots live in the same hash, which lives until the end of its day
	// window or its latest slot, whichever is later.
	dayEnd := now.Truncate(day).Add(day)
	_, err = l.ReserveCreation(ctx, ip, "long", 10*minute, true)
	check("ReserveCreation", err)
	_, err = l.ReserveCreation(ctx, ip, "short", minute, true)
	check("ReserveCreation shorter", err)
	if got := expireAt(l.keys.creation(ip)); !got.Equal(dayEnd) && serverNow(t, c).Add(10*minute).Before(dayEnd) {
		t.Errorf("creation key expires at %v with slots inside the day, want the day window's end %v", got, dayEnd)
	}
	later := dayEnd.Add(30 * minute)
	check("ExtendActive", l.ExtendActive(ctx, ip, "short", later))
	if got := expireAt(l.keys.creation(ip)); !got.Equal(later) {
		t.Errorf("creation key expires at %v after an extension past the day, want the slot's %v", got, later)
	}
	check("Release", l.Release(ctx, ip, "short"))
	if got := expireAt(l.keys.creation(ip)); !got.Equal(dayEnd) && serverNow(t, c).Add(10*minute).Before(dayEnd) {
		t.Errorf("creation key expires at %v after Release, want the day window's end %v", got, dayEnd)
	}
	check("Release last", l.Release(ctx, ip, "long"))
	// With no slot left, extending must not create one.
	check("ExtendActive released", l.ExtendActive(ctx, ip, "long", later))
	if n := activeCount(t, c, l, ip); n != 0 {
		t.Errorf("%d slots after releasing both and extending a released one, want 0", n)
	}
	_, err = l.AllowGlobalCreation(ctx)
	check("AllowGlobalCreation", err)

	got := storagetest.Leftovers(t, l.cfg.KeyPrefix)
	p := l.cfg.KeyPrefix
	want := []string{ // the request key may already have expired
		p + ":rl:{192.0.2.60}:create",
		l.keys.window("conn", ip, node.UnixMilli()/time.Minute.Milliseconds()),
		l.keys.window("request", ip, node.Unix()),
		p + ":rl:{global}:global-create",
	}
	if len(got) == 3 {
		want = append(want[:2], want[3])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys = %q, want %q (one hash per client: windows and slots)", got, want)
	}
}

func TestUnavailable(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	// A cluster client closes its connections in the background; a single
	// client to one of its nodes is closed once Close returns.
	var addr string
	for addr = range l.client.Nodes() {
		break
	}
	single, err := rueidis.NewClient(storagetest.Secure(t, rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true}))
	if err != nil {
		t.Fatal(err)
	}
	single.Close()
	closed := New(single, l.cfg)
	for _, tc := range []struct {
		name   string
		l      *Limiter
		ctx    context.Context
		wantIs error
	}{
		{"cancelled context", l, cancelled, context.Canceled},
		{"expired context", l, expired, context.DeadlineExceeded},
		{"closed client", closed, context.Background(), rueidis.ErrClosing},
	} {
		ops := map[string]func() error{
			"AllowRequest": func() error { _, err := tc.l.AllowRequest(tc.ctx, "192.0.2.1"); return err },
			"Allow": func() error {
				_, err := tc.l.Allow(tc.ctx, Rule{Name: "x", Limit: 1, Window: time.Second}, "192.0.2.1")
				return err
			},
			"ReserveCreation": func() error {
				_, err := tc.l.ReserveCreation(tc.ctx, "192.0.2.1", "mb", minute, true)
				return err
			},
			"AllowGlobalCreation": func() error { _, err := tc.l.AllowGlobalCreation(tc.ctx); return err },
			"Release":             func() error { return tc.l.Release(tc.ctx, "192.0.2.1", "mb") },
			"ExtendActive":        func() error { return tc.l.ExtendActive(tc.ctx, "192.0.2.1", "mb", time.Now()) },
		}
		for op, f := range ops {
			err := f()
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tc.wantIs) {
				t.Errorf("%s: %s error = %v, want ErrUnavailable wrapping %v", tc.name, op, err, tc.wantIs)
			}
		}
	}
}

func BenchmarkAllowRequest(b *testing.B) {
	l, _ := newLimiter(b, Config{})
	clients := make([]string, 1024)
	for i := range clients {
		clients[i] = ClientKey(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
	}
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := l.AllowRequest(ctx, clients[i%len(clients)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	// Edge nodes serve many connections at once; rueidis pipelines them.
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(1)) * 97
			for pb.Next() {
				if _, err := l.AllowRequest(ctx, clients[i%len(clients)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

// TestWindowExpirySetOnce: only the hit that finds a window's counter without
// an expiry sets one (PEXPIRE NX), so later hits write nothing but the INCR;
// and a counter left without an expiry (a pipeline cut after its INCR) gets
// one from the next hit.
func TestWindowExpirySetOnce(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx := context.Background()
	const ip = "192.0.2.61"
	node := time.Now()
	l.now = func() time.Time { return node }
	key := l.keys.window("request", ip, node.Unix())
	expireAt := func() int64 {
		t.Helper()
		ms, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	if _, err := l.AllowRequest(ctx, ip); err != nil {
		t.Fatal(err)
	}
	first := expireAt()
	if first <= 0 {
		t.Fatalf("after the first hit the counter's expiry is %d, want one set", first)
	}
	time.Sleep(15 * time.Millisecond)
	if _, err := l.AllowRequest(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if got := expireAt(); got != first {
		t.Errorf("the second hit moved the expiry from %d to %d; only the first sets it", first, got)
	}
	if err := c.Do(ctx, c.B().Persist().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllowRequest(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if got := expireAt(); got <= first {
		t.Errorf("a counter without an expiry has expiry %d after a hit, want one set again (after %d)", got, first)
	}
}

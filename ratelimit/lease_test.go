package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTakeNeverPassesTheLimit: leases are granted only the hits within the
// limit, hits handed back are leased again, and leases taken at once by many
// connections add up to exactly the limit.
func TestTakeNeverPassesTheLimit(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := Rule{Name: "mail", Limit: 10, Window: time.Minute}
	roomInWindow(t, c, time.Minute, 5*time.Second)
	take := func(client string, want int) Lease {
		t.Helper()
		lease, err := l.Take(ctx, r, client, want)
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	const ip = "198.51.100.20"
	var w int64
	for i, tc := range []struct{ want, granted int }{{4, 4}, {4, 4}, {4, 2}, {1, 0}} {
		lease := take(ip, tc.want)
		if lease.Granted != tc.granted || lease.Decision.Allowed != (tc.granted > 0) {
			t.Fatalf("lease %d of %d: %+v, want %d granted", i+1, tc.want, lease, tc.granted)
		}
		w = lease.Window
	}
	if d := take(ip, 1).Decision; d.Kind != "mail" || d.RetryAfter <= 0 {
		t.Errorf("refusal %+v, want kind mail and a RetryAfter", d)
	}
	if err := l.Give(ctx, r, ip, w, 3); err != nil {
		t.Fatal(err)
	}
	if got := take(ip, 5).Granted; got != 3 {
		t.Errorf("after 3 handed back, a lease of 5 got %d, want 3", got)
	}
	// Per-hit decisions and leases count in one number.
	if d, err := l.Allow(ctx, r, ip); err != nil || d.Allowed {
		t.Errorf("Allow after the window is leased out: %+v, %v", d, err)
	}

	const ip2, limit = "198.51.100.21", 25
	r.Limit = limit
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			lease, err := l.Take(ctx, r, ip2, 3)
			if err != nil {
				t.Error(err)
				return
			}
			granted.Add(int64(lease.Granted))
		})
	}
	wg.Wait()
	if got := granted.Load(); got != limit {
		t.Errorf("20 leases of 3 at once got %d hits, want exactly %d", got, limit)
	}
}

package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// TestShortWindowsNotReplicated: the request rate and the SMTP minutes are
// counted on the primary only (count.lua, issue 35), exactly as before,
// while a longer window and the creation windows still reach the replica.
func TestShortWindowsNotReplicated(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	l := New(cluster.Client(), Config{KeyPrefix: "rt", RequestsPerSecond: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const ip = "198.51.100.9"
	conn := Rule{Name: "conn", Limit: 2, Window: time.Minute}
	hourly := Rule{Name: "hourly", Limit: 2, Window: time.Hour}

	// The limits stay exact: 2 of 3 per minute. The request rate is
	// checked within one second of the node clock.
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, conn, ip)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("conn hit %d: allowed %v, want %v", i+1, d.Allowed, want)
		}
	}
	for time.Now().UnixMilli()%1000 > 500 {
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 4 {
		d, err := l.AllowRequest(ctx, ip)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Allowed, i < 3; got != want {
			t.Fatalf("request %d: allowed %v, want %v", i+1, got, want)
		}
	}
	if _, err := l.Allow(ctx, hourly, ip); err != nil {
		t.Fatal(err)
	}
	if d, err := l.ReserveCreation(ctx, ip, "box1", time.Hour, true); err != nil || !d.Allowed {
		t.Fatalf("ReserveCreation = %+v, %v", d, err)
	}

	primary := cluster.PrimaryFor(l.keys.creation(ip))
	replica := cluster.ReplicaOf(primary)
	keys := func(addr string) string {
		return cluster.Redis(addr, "KEYS", "rt:rl:{"+ip+"}:*")
	}
	onPrimary := keys(primary)
	for _, k := range []string{":w:conn:", ":w:request:", ":w:hourly:", "}:create"} {
		if !strings.Contains(onPrimary, k) {
			t.Fatalf("primary's keys %q lack %q", onPrimary, k)
		}
	}
	if ttl := cluster.Redis(primary, "PTTL", l.keys.window("conn", ip, time.Now().UnixMilli()/60000)); ttl == "-1" {
		t.Error("the minute counter has no TTL")
	}
	// Replication is in order: once the replica has the creation hash,
	// written last, it has had every write before it.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(keys(replica), "}:create") {
		if time.Now().After(deadline) {
			t.Fatalf("the replica never got the creation hash: %q", keys(replica))
		}
		time.Sleep(20 * time.Millisecond)
	}
	onReplica := keys(replica)
	if !strings.Contains(onReplica, ":w:hourly:") {
		t.Errorf("the hour window is not on the replica: %q", onReplica)
	}
	for _, k := range []string{":w:conn:", ":w:request:"} {
		if strings.Contains(onReplica, k) {
			t.Errorf("the replica holds the short window %q: %q", k, onReplica)
		}
	}
}

// TestShortWindowsCountWithOldNodes: a node before issue 35 counts a short
// window with INCR and PEXPIRE NX on the same key; both kinds of node count
// one number, so a fleet mid-rollout admits exactly the limit.
func TestShortWindowsCountWithOldNodes(t *testing.T) {
	t.Parallel()
	l, c := newLimiter(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const ip = "198.51.100.10"
	r := Rule{Name: "mail", Limit: 4, Window: time.Minute}
	roomInWindow(t, c, time.Minute, 5*time.Second)
	old := func() {
		key := l.keys.window(r.Name, ip, time.Now().UnixMilli()/r.Window.Milliseconds())
		for _, err := range c.DoMulti(ctx, c.B().Incr().Key(key).Build(),
			c.B().Pexpire().Key(key).Milliseconds(2*r.Window.Milliseconds()).Nx().Build()) {
			if err.Error() != nil {
				t.Fatal(err.Error())
			}
		}
	}
	old()
	for i := range 2 {
		if d, err := l.Allow(ctx, r, ip); err != nil || !d.Allowed {
			t.Fatalf("new node's hit %d: %+v, %v", i+1, d, err)
		}
	}
	old() // the fourth hit
	if d, err := l.Allow(ctx, r, ip); err != nil || d.Allowed {
		t.Fatalf("fifth hit, after 2 old and 2 new: %+v, %v; want refused", d, err)
	}
}

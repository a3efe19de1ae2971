package edge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

// TestEventsSurviveFailover kills the primary that holds a mailbox while its
// event stream is open. A message stored during the gap (the sender retries
// until a replica has taken over) and one stored after recovery must both
// reach the client. The promoted replica is another node, whose stream ids
// do not continue the history the stream has sent: its first answer (the
// catch-up read after the resubscription, or an event it publishes) ends the
// stream once, and the client reconnects and lists as the spec says. The
// list has the gap message; the new stream carries the next one.
func TestEventsSurviveFailover(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	client := cluster.Client()
	e := serveEnv(t, client, "failover", nil)
	u := e.newUser("")
	m := u.open()
	addr := m["address"].(string)
	s, _ := u.openStream()
	before := e.deliver(addr, "before")
	assertMessageEvent(t, s.next(t, 5*time.Second), before)

	primary := cluster.PrimaryFor("failover:{" + storage.TagOf(addr) + "}:box")
	cluster.Kill(primary)

	// Deliver as an SMTP sender would: retry on failure until accepted.
	var gap storage.Summary
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		// With its delivery key, as ingest sends it: an attempt that was
		// stored but not acknowledged (no replica yet) is found again.
		gap, err = e.store.Deliver(ctx, addr, storage.NewMessage{From: "a@b.example", Subject: "during the gap",
			Status: storage.StatusReady, Key: storage.DeliveryKey([]byte("during the gap"))})
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("deliver during failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.waitEnd(t, 30*time.Second)
	if logs := e.logs.String(); !strings.Contains(logs, "another Redis node answers for the mailbox") {
		t.Errorf("no log line for the node change:\n%s", logs)
	}
	s2, _ := u.openStream()
	if r := u.do("GET", "/messages", ""); !strings.Contains(string(r.raw), gap.ID.String()) {
		t.Fatalf("the list after the reconnect lacks the gap message %s: %s", gap.ID, r.raw)
	}
	after := e.deliver(addr, "after")
	assertMessageEvent(t, s2.next(t, 10*time.Second), after)
	s2.quiet(t, 300*time.Millisecond) // and nothing twice
}

// A client whose rate-limit counter lives on a primary that stops answering
// still reads its mailbox, which lives on another: a read whose limit check
// cannot reach Redis is served (fails open). A write is refused with 503.
func TestReadsSurviveTheirRateLimitPrimary(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	client := cluster.Client()
	prefix := "rlfail"
	e := serveEnv(t, client, prefix, nil)
	var u *user
	var limitPrimary string
	for {
		ip := randomIP()
		u = e.newUser(ip)
		m := u.open()
		limitPrimary = cluster.PrimaryFor(prefix + ":rl:{" + ip + "}:create")
		if cluster.PrimaryFor(prefix+":{"+storage.TagOf(m["address"].(string))+"}:box") != limitPrimary {
			e.deliver(m["address"].(string), "hello")
			break
		}
	}
	_, u = e.tight(t, u, func(c *edge.Config, _ *ratelimit.Config) { c.RedisTimeout = time.Second })
	cluster.Stop(limitPrimary)
	start := time.Now()
	r := u.do("GET", "/messages", "")
	u.want(r, 200, "")
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("GET /messages took %v with its limit primary frozen, want about half the 1 s Redis budget", took)
	}
	u.want(u.do("DELETE", "/messages/00000000-0000-4000-8000-000000000000", ""), 503, "DEPENDENCY_UNAVAILABLE")
}

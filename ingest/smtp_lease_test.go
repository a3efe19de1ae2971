package ingest_test

import (
	"errors"
	"net/smtp"
	"net/textproto"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
)

// TestSMTPMailLeaseExact: a connection leases its transactions (issue 35),
// and the per-IP rule still admits exactly its limit over every connection
// of the client: a lease's unused transactions refuse another connection
// early, and are handed back when their connection closes.
func TestSMTPMailLeaseExact(t *testing.T) {
	t.Parallel()
	const limit = 10
	h := newSMTPHarness(t, ingest.Config{MailRule: ratelimit.Rule{Limit: limit}})
	roomInWindow(t, 0, 20*time.Second)
	dial := func() *smtp.Client {
		t.Helper()
		c, err := smtp.Dial(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Hello("client.example.org"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// send sends up to n transactions on c and returns how many were
	// accepted before a 421.
	send := func(c *smtp.Client, n int) int {
		t.Helper()
		for i := range n {
			if err := c.Mail("sender@example.org"); err != nil {
				var perr *textproto.Error
				if !errors.As(err, &perr) || perr.Code != 421 {
					t.Fatalf("MAIL %d: %v, want 250 or 421", i+1, err)
				}
				return i
			}
			if err := c.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	a := dial()
	accepted := send(a, 4) // the first with the connection, then leases of 2 and 4: 3 unused
	b := dial()
	defer b.Close()
	gotB := send(b, limit) // 1 + a lease of 2, then nothing left
	if gotB >= limit-4 {
		t.Errorf("the second connection got %d while the first holds 3 unused, want fewer than %d", gotB, limit-4)
	}
	accepted += gotB
	if err := a.Quit(); err != nil {
		t.Fatal(err)
	}
	// The lease is handed back as the connection closes, before its
	// session slot is freed: wait until no session is open.
	deadline := time.Now().Add(5 * time.Second)
	for h.metric(t, "mayfly_smtp_sessions_open") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sessions never closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := dial()
	defer c.Close()
	gotC := send(c, limit)
	if gotC == 0 {
		t.Error("the first connection's unused transactions were not handed back")
	}
	accepted += gotC
	if accepted != limit {
		t.Errorf("%d transactions accepted over three connections, want exactly %d (second %d, third %d)", accepted, limit, gotB, gotC)
	}
}

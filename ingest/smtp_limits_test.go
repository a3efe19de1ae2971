package ingest_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
)

// dialGreeting connects and returns the connection, its reader and the
// first reply line.
func dialGreeting(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return greeting(t, c)
}

// greeting reads c's first reply line; c is closed when the test ends.
func greeting(t *testing.T, c net.Conn) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	lines, err := readReply(r)
	if err != nil {
		t.Fatalf("greeting: %v (got %q)", err, lines)
	}
	return c, r, lines[len(lines)-1]
}

// assertClosed fails unless the server closed c.
func assertClosed(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); !isClosed(err) {
		t.Fatalf("read %q, %v; want the connection closed", line, err)
	}
}

// TestSMTPConnectionLimits covers the refusals made before the greeting:
// each answers 421 instead of 220 and closes the connection.
func TestSMTPConnectionLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  ingest.Config
		// open is how many connections are opened (and kept) first; each
		// must be greeted with 220.
		open   int
		want   string // the reply of the next connection
		reason string // its metrics label
	}{
		{"per-IP connection rule across nodes", ingest.Config{ConnRule: ratelimit.Rule{Limit: 2}}, 2, "421 4.7.0", "conn_rate"},
		{"concurrent sessions per IP on one node", ingest.Config{MaxSessionsPerIP: 2}, 2, "421 4.7.0", "ip_sessions"},
		{"concurrent sessions on one node", ingest.Config{MaxSessions: 3}, 3, "421 4.4.5", "busy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSMTPHarness(t, tc.cfg)
			if tc.cfg.ConnRule.Limit > 0 {
				roomInWindow(t, tc.cfg.ConnRule.Window, 10*time.Second)
			}
			for i := range tc.open {
				if _, _, got := dialGreeting(t, h.addr); !strings.HasPrefix(got, "220 ") {
					t.Fatalf("connection %d: greeting %q, want 220", i, got)
				}
			}
			c, r, got := dialGreeting(t, h.addr)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("greeting %q, want %q", got, tc.want)
			}
			assertNoInternalText(t, got)
			assertClosed(t, c, r)
			if got, want := h.metric(t, "mayfly_smtp_sessions_open"), float64(tc.open); got != want {
				t.Errorf("sessions open = %v, want %v", got, want)
			}
			if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", tc.reason); got != 1 {
				t.Errorf("rejections{reason=%q} = %v, want 1", tc.reason, got)
			}
		})
	}
}

// TestSMTPSessionSlotsAreFreed: closed sessions give their slot back, so
// the per-node caps do not leak.
func TestSMTPSessionSlotsAreFreed(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxSessionsPerIP: 1})
	for i := range 5 {
		c, r, got := dialGreeting(t, h.addr)
		if !strings.HasPrefix(got, "220 ") {
			t.Fatalf("connection %d: greeting %q, want 220", i, got)
		}
		io.WriteString(c, "QUIT\r\n")
		assertReply(t, c, r, "221")
		assertClosed(t, c, r)
		c.Close()
		// The slot is freed when the server closes its end, which may be
		// just after the client saw the close.
		waitFor(t, func() bool { return h.metric(t, "mayfly_smtp_sessions_open") == 0 })
	}
	if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", "ip_sessions"); got != 0 {
		t.Errorf("ip_sessions rejections = %v, want 0", got)
	}
}

// TestSMTPBufferBudget: a DATA that finds no room in the node's buffer
// budget gets 451 4.3.1 and stores nothing.
func TestSMTPBufferBudget(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 64 << 10, MaxBufferBytes: 64 << 10})
	a, _ := h.mailbox(t, 10*time.Minute)
	b, bcred := h.mailbox(t, 10*time.Minute)

	// The first session is inside DATA and holds the whole budget.
	c1, r1, _ := dialGreeting(t, h.addr)
	for _, cmd := range []string{"EHLO one.example.org", "MAIL FROM:<s@example.org>", "RCPT TO:<" + a.Address + ">"} {
		io.WriteString(c1, cmd+"\r\n")
		assertReply(t, c1, r1, "250")
	}
	io.WriteString(c1, "DATA\r\n")
	assertReply(t, c1, r1, "354")
	io.WriteString(c1, "Subject: slow\r\n\r\nstill typing")

	converse(t, h.addr, append(envelope(b.Address),
		step{send: "DATA", want: "354"},
		step{send: rfc822(b.Address, "no room", "x"), want: "451 4.3.1"}))
	if got := len(h.messages(t, b, bcred)); got != 0 {
		t.Errorf("mailbox holds %d messages, want 0", got)
	}

	// Once the first message is done, the budget is free again.
	io.WriteString(c1, "\r\n.\r\n")
	assertReply(t, c1, r1, "250")
	converse(t, h.addr, append(envelope(b.Address),
		step{send: "DATA", want: "354"},
		step{send: rfc822(b.Address, "room", "x"), want: "250"}))
}

// TestSMTPShutdown: Shutdown lets a DATA in progress finish with 250, ends
// idle sessions with 421 and refuses new connections.
func TestSMTPShutdown(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)

	busy, rb, _ := dialGreeting(t, h.addr)
	for _, cmd := range []string{"EHLO busy.example.org", "MAIL FROM:<s@example.org>", "RCPT TO:<" + m.Address + ">"} {
		io.WriteString(busy, cmd+"\r\n")
		assertReply(t, busy, rb, "250")
	}
	io.WriteString(busy, "DATA\r\n")
	assertReply(t, busy, rb, "354")
	io.WriteString(busy, "Subject: in flight\r\n\r\nfirst half")

	idle, ri, _ := dialGreeting(t, h.addr)
	io.WriteString(idle, "EHLO idle.example.org\r\n")
	assertReply(t, idle, ri, "250")

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	assertReply(t, idle, ri, "421 4.4.2")
	assertClosed(t, idle, ri)

	io.WriteString(busy, ", second half\r\n.\r\n")
	assertReply(t, busy, rb, "250")
	assertReply(t, busy, rb, "421 4.4.2")
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		c.Close()
		t.Errorf("a connection after Shutdown was accepted")
	}
	if got := len(h.messages(t, m, cred)); got != 1 {
		t.Errorf("mailbox holds %d messages, want the one in flight", got)
	}
}

// assertReply reads one reply and checks the prefix of its last line.
func assertReply(t *testing.T, c net.Conn, r *bufio.Reader, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	lines, err := readReply(r)
	if err != nil {
		t.Fatalf("read reply: %v (got %q), want %q", err, lines, want)
	}
	if got := lines[len(lines)-1]; !strings.HasPrefix(got, want) {
		t.Fatalf("reply %q, want %q", got, want)
	}
	assertNoInternalText(t, strings.Join(lines, "\n"))
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached in 5 s")
}

// TestSMTPShutdownDeadline: a DATA that does not finish within Shutdown's
// context is cut off: Shutdown returns the context's error and the client
// is disconnected.
func TestSMTPShutdownDeadline(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	c, r, _ := dialGreeting(t, h.addr)
	for _, cmd := range []string{"EHLO stuck.example.org", "MAIL FROM:<s@example.org>", "RCPT TO:<" + m.Address + ">"} {
		io.WriteString(c, cmd+"\r\n")
		assertReply(t, c, r, "250")
	}
	io.WriteString(c, "DATA\r\n")
	assertReply(t, c, r, "354")
	io.WriteString(c, "Subject: never finished\r\n\r\n")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := h.srv.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Shutdown = %v, want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if lines, err := readReply(r); !isClosed(err) {
		t.Fatalf("after Shutdown: %q, %v; want the connection closed", lines, err)
	}
	waitFor(t, func() bool { return h.metric(t, "mayfly_smtp_sessions_open") == 0 })
	if got := len(h.messages(t, m, cred)); got != 0 {
		t.Errorf("mailbox holds %d messages, want 0", got)
	}
}

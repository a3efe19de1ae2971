package ingest_test

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/internal/localnet"
)

// dialGreetingFrom is dialGreeting from the local address from.
func dialGreetingFrom(t *testing.T, addr string, from netip.Addr) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := localnet.Dialer(from).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return greeting(t, c)
}

// openData opens a session from from and runs it up to DATA's 354.
func openData(t *testing.T, h *smtpHarness, from netip.Addr, to string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, r, got := dialGreetingFrom(t, h.addr, from)
	if !strings.HasPrefix(got, "220 ") {
		t.Fatalf("greeting from %s: %q", from, got)
	}
	for _, cmd := range []string{"EHLO client.example.org", "MAIL FROM:<s@example.org>", "RCPT TO:<" + to + ">"} {
		io.WriteString(c, cmd+"\r\n")
		assertReply(t, c, r, "250")
	}
	io.WriteString(c, "DATA\r\n")
	assertReply(t, c, r, "354")
	return c, r
}

// text is n bytes of message: a header, then lines of x, no terminator.
func text(n int) string {
	const head = "Subject: big\r\n\r\n"
	line := strings.Repeat("x", 998) + "\r\n"
	body := strings.Repeat(line, (n-len(head))/len(line)+1)
	return (head + body)[:n-2] + "\r\n"
}

// settled waits until the buffered bytes are at least atLeast (the bytes
// the transfers sent so far must hold: a session whose reads lag, on a busy
// machine, may hold still for a poll) and stop changing, and returns them.
func settled(t *testing.T, h *smtpHarness, atLeast float64) float64 {
	t.Helper()
	last := -1.0
	for range 50 {
		time.Sleep(150 * time.Millisecond)
		v := h.metric(t, "mayfly_smtp_buffered_bytes")
		if v == last && v >= atLeast {
			return v
		}
		last = v
	}
	t.Fatalf("buffered bytes still changing or under %.0f: %v", atLeast, last)
	return 0
}

func v4(a, b, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b, c, d}) }

// Issue 26, scaled down: senders from three addresses fill the node's
// buffer budget with transfers that stall without their terminator. Each
// client's share of the budget, and reservations that follow the bytes
// received, leave room for a fourth address's small message. Before, each
// 1 MiB transfer reserved 2 MiB and one address could take the whole
// budget: the fourth got 451 4.3.1.
func TestSMTPBufferStalledSenders(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 2 << 20, MaxBufferBytes: 12 << 20,
		MaxBufferBytesPerIP: 3 << 20, MinDataRate: -1, DataTimeout: time.Minute})
	box, cred := h.mailbox(t, 10*time.Minute)
	for ip := range byte(3) {
		for range 4 {
			c, _ := openData(t, h, v4(127, 0, 42, 2+ip), box.Address)
			if _, err := io.WriteString(c, text(1<<20)); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := settled(t, h, 0)
	if held > 9<<20 {
		t.Errorf("stalled senders hold %.0f bytes, more than their 3 shares of 3 MiB", held)
	}
	c, r := openData(t, h, v4(127, 0, 42, 5), box.Address)
	io.WriteString(c, text(2<<10)+".\r\n")
	assertReply(t, c, r, "250")
	if got := len(h.messages(t, box, cred)); got != 1 {
		t.Errorf("mailbox holds %d messages, want 1", got)
	}
	if got := h.metric(t, "mayfly_smtp_messages_total", "result", "ip_buffer"); got != 0 {
		t.Logf("refused over their share: %v (their reply waits for their terminator)", got)
	}
}

// A transfer holds what it received, rounded up to a chunk, not the double
// a growing slice reserved: 1 MiB + 1 KiB held 2 MiB, so a 1.5 MiB message
// no longer fit a 3 MiB budget beside it.
func TestSMTPBufferFollowsBytes(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 2 << 20, MaxBufferBytes: 3 << 20, MinDataRate: -1})
	box, _ := h.mailbox(t, 10*time.Minute)
	c1, r1 := openData(t, h, v4(127, 0, 43, 2), box.Address)
	io.WriteString(c1, text(1<<20+1<<10))
	if held := settled(t, h, 1<<20+1<<10); held > 1<<20+128<<10 {
		t.Errorf("1 MiB + 1 KiB received holds %.0f bytes", held)
	}
	c, r := openData(t, h, v4(127, 0, 43, 3), box.Address)
	io.WriteString(c, text(3<<19)+".\r\n")
	assertReply(t, c, r, "250")
	io.WriteString(c1, ".\r\n")
	assertReply(t, c1, r1, "250")
	if held := settled(t, h, 0); held != 0 {
		t.Errorf("%.0f bytes still held after both transfers", held)
	}
}

// One client's transfers together get its share of the budget at most:
// past it DATA gets 451 4.7.0; another client still gets room.
func TestSMTPBufferShare(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 1 << 20, MaxBufferBytes: 8 << 20,
		MaxBufferBytesPerIP: 2 << 20, MinDataRate: -1})
	box, _ := h.mailbox(t, 10*time.Minute)
	for range 2 {
		c, _ := openData(t, h, v4(127, 0, 44, 2), box.Address)
		io.WriteString(c, text(900<<10))
	}
	settled(t, h, 2*(900<<10)) // both held, before the third asks for room
	c, r := openData(t, h, v4(127, 0, 44, 2), box.Address)
	io.WriteString(c, text(900<<10)+".\r\n")
	assertReply(t, c, r, "451 4.7.0")
	if got := h.metric(t, "mayfly_smtp_messages_total", "result", "ip_buffer"); got != 1 {
		t.Errorf("messages{result=ip_buffer} = %v, want 1", got)
	}
	c, r = openData(t, h, v4(127, 0, 44, 3), box.Address)
	io.WriteString(c, text(900<<10)+".\r\n")
	assertReply(t, c, r, "250")
}

// A transfer under the minimum rate is ended with 421 4.4.2, its
// connection closed and its buffer freed, long before the DATA timeout; one
// above the floor is not.
func TestSMTPSlowTransfer(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MinDataRate: 8 << 10, DataRateWindow: time.Second,
		DataTimeout: 30 * time.Second})
	box, cred := h.mailbox(t, 10*time.Minute)

	c, r := openData(t, h, v4(127, 0, 45, 2), box.Address)
	start := time.Now()
	io.WriteString(c, text(256<<10)) // then nothing
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	lines, err := readReply(r)
	if err != nil || !strings.HasPrefix(lines[len(lines)-1], "421 4.4.2") {
		t.Fatalf("stalled transfer: %q, %v; want 421 4.4.2", lines, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stalled transfer ended after %v, want within two windows", d)
	}
	assertClosed(t, c, r)
	if got := h.metric(t, "mayfly_smtp_buffered_bytes"); got != 0 {
		t.Errorf("buffered bytes = %v after the slow transfer ended, want 0", got)
	}
	if got := h.metric(t, "mayfly_smtp_messages_total", "result", "too_slow"); got != 1 {
		t.Errorf("messages{result=too_slow} = %v, want 1", got)
	}

	c, r = openData(t, h, v4(127, 0, 45, 3), box.Address)
	io.WriteString(c, "Subject: steady\r\n\r\n")
	for range 50 { // 16 KiB every 50 ms: 320 KiB/s for 2.5 s, 40 times the floor
		io.WriteString(c, text(16<<10))
		time.Sleep(50 * time.Millisecond)
	}
	io.WriteString(c, ".\r\n")
	assertReply(t, c, r, "250")
	if got := len(h.messages(t, box, cred)); got != 1 {
		t.Errorf("mailbox holds %d messages, want 1", got)
	}
}

// A session that finishes no message is ended IdleSessionTimeout after its
// start or its last DATA, however often it sends NOOP; before, NOOP every
// 59 s held a slot for the whole 15-minute session.
func TestSMTPIdleSession(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	h := newSMTPHarness(t, ingest.Config{IdleSessionTimeout: idle, ReadTimeout: 10 * time.Second})
	box, _ := h.mailbox(t, 10*time.Minute)

	// noops sends NOOP every 100 ms until the 421 and returns when it came.
	noops := func(c net.Conn, r *bufio.Reader) time.Time {
		t.Helper()
		for deadline := time.Now().Add(idle + 5*time.Second); time.Now().Before(deadline); {
			io.WriteString(c, "NOOP\r\n")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			lines, err := readReply(r)
			if err != nil {
				t.Fatalf("NOOP: %q, %v", lines, err)
			}
			if got := lines[len(lines)-1]; strings.HasPrefix(got, "421 4.4.2") {
				assertClosed(t, c, r)
				return time.Now()
			} else if !strings.HasPrefix(got, "250") {
				t.Fatalf("NOOP: %q", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("NOOPs kept the session open for %v", idle+5*time.Second)
		return time.Time{}
	}

	// The session's clock starts after start (the server's accept), so it
	// cannot end before start+idle.
	start := time.Now()
	c, r, _ := dialGreeting(t, h.addr)
	io.WriteString(c, "EHLO client.example.org\r\n")
	assertReply(t, c, r, "250")
	if d := noops(c, r).Sub(start); d < idle {
		t.Errorf("ended after %v, before its idle bound %v", d, idle)
	}

	// A message restarts the clock: it ends after the message's end, which
	// is after start+pause, so not before start+pause+idle; without the
	// restart it would end about start+idle. The message itself takes a
	// few round trips after the pause, well within the idle bound.
	const pause = 800 * time.Millisecond
	start = time.Now()
	c, r, _ = dialGreeting(t, h.addr)
	io.WriteString(c, "EHLO client.example.org\r\n")
	assertReply(t, c, r, "250")
	time.Sleep(pause)
	for _, cmd := range []string{"MAIL FROM:<s@example.org>", "RCPT TO:<" + box.Address + ">"} {
		io.WriteString(c, cmd+"\r\n")
		assertReply(t, c, r, "250")
	}
	io.WriteString(c, "DATA\r\n")
	assertReply(t, c, r, "354")
	io.WriteString(c, rfc822(box.Address, "keeps it", "x")+"\r\n")
	assertReply(t, c, r, "250")
	if d := noops(c, r).Sub(start); d < pause+idle {
		t.Errorf("ended %v after the connection, before the idle bound %v counted from its message after %v", d, idle, pause)
	}
}

// One network's sessions share MaxSessionsPerNet: four addresses of one
// /24 get five sessions; another /24 is still greeted.
func TestSMTPSessionsPerIPv4Network(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxSessionsPerIP: 2, MaxSessionsPerNet: 5})
	greeted := 0
	for i := range 8 {
		_, _, got := dialGreetingFrom(t, h.addr, v4(127, 0, 46, byte(1+i/2)))
		switch {
		case strings.HasPrefix(got, "220 "):
			greeted++
		case !strings.HasPrefix(got, "421 4.7.0"):
			t.Fatalf("greeting %q, want 220 or 421 4.7.0", got)
		}
	}
	if greeted != 5 {
		t.Errorf("8 connections from 4 addresses of one /24: %d greeted, want 5", greeted)
	}
	if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", "net_sessions"); got != 3 {
		t.Errorf("rejections{reason=net_sessions} = %v, want 3", got)
	}
	if _, _, got := dialGreetingFrom(t, h.addr, v4(127, 0, 47, 1)); !strings.HasPrefix(got, "220 ") {
		t.Errorf("another /24: %q, want 220", got)
	}
}

// Issue 26, scaled down: one IPv6 /58 (64 clients of one /48) filled the
// node's sessions, two per /64; now its /48 gets MaxSessionsPerNet and
// others are greeted.
func TestSMTPSessionsPerIPv6Network(t *testing.T) {
	t.Parallel()
	block := localnet.Block6(t)
	h := newSMTPHarnessAt(t, "[::1]:0", ingest.Config{MaxSessions: 50, MaxSessionsPerIP: 2, MaxSessionsPerNet: 10})
	greeted := 0
	for subnet := range uint16(64) {
		for n := range uint64(2) {
			_, _, got := dialGreetingFrom(t, h.addr, localnet.Addr(block, subnet, n+1))
			if strings.HasPrefix(got, "220 ") {
				greeted++
			}
		}
	}
	if greeted != 10 {
		t.Errorf("128 connections from one /58: %d greeted, want 10", greeted)
	}
	if _, _, got := dialGreetingFrom(t, h.addr, netip.IPv6Loopback()); !strings.HasPrefix(got, "220 ") {
		t.Errorf("another network: %q, want 220", got)
	}
}

package ingest_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// The end of DATA at the level of raw SMTP bytes: <CRLF>.<CRLF> ends the
// message whatever bytes come before it, nothing else does, and a
// transaction the client pipelined after the end goes to its own recipient.
// These fail with go-smtp v0.25.1 as released (third_party/go-smtp/README.md):
// the message that ends in a bare CR gets no reply within the test's 5 s
// (the server waits out its 5-minute DATA timeout), and the pipelined
// transaction lands in the first recipient's mailbox.

// rawSession is a raw SMTP connection: write any bytes, read replies.
type rawSession struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialRaw connects, reads the greeting and says EHLO.
func dialRaw(t *testing.T, addr string) *rawSession {
	t.Helper()
	c, r, greeting := dialGreeting(t, addr)
	if !strings.HasPrefix(greeting, "220") {
		t.Fatalf("greeting %q", greeting)
	}
	s := &rawSession{t: t, c: c, r: r}
	s.send("EHLO client.example.org\r\n")
	s.expect("250")
	return s
}

func (s *rawSession) send(b string) {
	s.t.Helper()
	if _, err := io.WriteString(s.c, b); err != nil {
		s.t.Fatalf("write %q: %v", abbreviate(b), err)
	}
}

// expect reads one reply for each prefix, in order, each within 5 s, and
// returns how long the first took.
func (s *rawSession) expect(prefixes ...string) time.Duration {
	s.t.Helper()
	start := time.Now()
	var first time.Duration
	for i, p := range prefixes {
		_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		lines, err := readReply(s.r)
		if i == 0 {
			first = time.Since(start)
		}
		if err != nil {
			s.t.Fatalf("reply %d: %v after %v (got %q); want %q", i, err, time.Since(start).Round(time.Millisecond), lines, p)
		}
		if got := lines[len(lines)-1]; !strings.HasPrefix(got, p) {
			s.t.Fatalf("reply %d = %q, want %q", i, got, p)
		}
	}
	return first
}

// transaction is MAIL, RCPT and DATA to one recipient, as one pipelined
// write.
func transaction(to string) string {
	return "MAIL FROM:<sender@example.org>\r\nRCPT TO:<" + to + ">\r\nDATA\r\n"
}

// header is a message's header section and the blank line after it.
func header(to, subject string) string {
	return "From: <sender@example.org>\r\nTo: <" + to + ">\r\nSubject: " + subject + "\r\n\r\n"
}

// TestSMTPDataEnd: messages whose last lines end in bare CRs, each followed
// at once (same write) by a second transaction to another mailbox. Each
// message gets its 250 at once, and each mailbox holds exactly its own
// message.
func TestSMTPDataEnd(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	tests := []struct {
		name string
		body string // the first message's body, then "\r\n.\r\n"
	}{
		{"last line ends in a bare CR", "first body\r\n\r"},
		{"several bare CRs", "first body\r\r\r"},
		{"stuffed dot then bare CR", "first body\r\n..\r"},
		{"CR CR LF mid-message", "first\r\r\nbody\r"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, credA := h.mailbox(t, 10*time.Minute)
			b, credB := h.mailbox(t, 10*time.Minute)
			s := dialRaw(t, h.addr)
			s.send(transaction(a.Address))
			s.expect("250", "250", "354")
			s.send(header(a.Address, "first") + tc.body + "\r\n.\r\n" +
				transaction(b.Address) + header(b.Address, "second") + "second body\r\n.\r\n")
			took := s.expect("250 ", "250", "250", "354", "250 ")
			t.Logf("reply to the first message after %v", took)
			s.send("QUIT\r\n")
			s.expect("221")

			gotA := onlyMessage(t, h, a, credA)
			if got, want := gotA.Subject, "first"; got != want {
				t.Errorf("first mailbox: Subject = %q, want %q", got, want)
			}
			for _, leak := range []string{"second", "MAIL FROM", "RCPT TO"} {
				if strings.Contains(gotA.Text, leak) {
					t.Errorf("first mailbox's message holds %q: %q", leak, gotA.Text)
				}
			}
			gotB := onlyMessage(t, h, b, credB)
			if got, want := gotB.Subject, "second"; got != want {
				t.Errorf("second mailbox: Subject = %q, want %q", got, want)
			}
			if got, want := gotB.Text, "second body"; got != want {
				t.Errorf("second mailbox: Text = %q, want %q", got, want)
			}
		})
	}
}

// TestSMTPDataSmuggling: the SMTP-smuggling separators never end DATA, so
// the transaction hidden after one never starts: the sender gets one reply
// for the whole, the hidden recipient gets nothing, and the next command is
// answered as a command.
func TestSMTPDataSmuggling(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	for _, sep := range []string{"\n.\n", "\r\n.\n", "\n.\r\n", "\r.\r\n", "\r\r\n.\n", "\r\n.\r\r\n"} {
		t.Run(strings.NewReplacer("\r", "CR", "\n", "LF").Replace(sep), func(t *testing.T) {
			t.Parallel()
			a, credA := h.mailbox(t, 10*time.Minute)
			b, credB := h.mailbox(t, 10*time.Minute)
			s := dialRaw(t, h.addr)
			s.send(transaction(a.Address))
			s.expect("250", "250", "354")
			s.send(header(a.Address, "cover") + "cover body" + sep +
				transaction(b.Address) + header(b.Address, "smuggled") + "smuggled body\r\n.\r\n")
			s.expect("250 ")
			s.send("NOOP\r\n")
			s.expect("250")
			if msgs := h.messages(t, b, credB); len(msgs) != 0 {
				t.Fatalf("hidden recipient's mailbox holds %d messages, want 0: %+v", len(msgs), msgs[0].Summary)
			}
			if got, want := onlyMessage(t, h, a, credA).Subject, "cover"; got != want {
				t.Errorf("Subject = %q, want %q", got, want)
			}
		})
	}
}

// TestE2ESwaksBareCR: swaks sends, byte for byte (--no-data-fixup), a
// message whose last line ends in a bare CR, as a real-world message in a
// public MIME corpus does; it gets 250 at once, not a timeout.
func TestE2ESwaksBareCR(t *testing.T) {
	t.Parallel()
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		t.Fatalf("swaks not installed (deploy/install-deps.sh installs it): %v", err)
	}
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	data := "From: <sender@example.org>\r\nTo: <" + m.Address + ">\r\nSubject: corpus-like\r\nMIME-Version: 1.0\r\n\r\n" +
		"Last line of the text, ended the way some old mailers end it\r\r\n.\r\n"
	file := filepath.Join(t.TempDir(), "bare-cr.eml")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, swaks, "--server", h.addr, "--to", m.Address, "--from", "sender@example.org",
		"--helo", "client.example.org", "--timeout", "5", "--no-data-fixup", "--data", file).CombinedOutput()
	if err != nil {
		t.Fatalf("swaks: %v after %v\n%s", err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("swaks done in %v", time.Since(start).Round(time.Millisecond))
	got := onlyMessage(t, h, m, cred)
	if got, want := got.Subject, "corpus-like"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	if got, want := got.Status, storage.StatusReady; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
}

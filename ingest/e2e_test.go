package ingest_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"net/smtp"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// The end-to-end tests deliver with real SMTP clients (net/smtp and swaks)
// to a mailbox on the real cluster and read the message back the way the
// API does: Select for a session, then Messages and Message.

const multipartAlternative = "From: =?UTF-8?Q?J=C3=B6rg?= <joerg@example.org>\r\n" +
	"To: <%s>\r\n" +
	"Subject: =?ISO-8859-1?Q?Best=E4tigung?= 123456\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"alt\"\r\n" +
	"\r\n" +
	"--alt\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Ihr Code: 123456 =E2=80=93 g=C3=BCltig 10 Minuten.\r\n" +
	"--alt\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"\r\n" +
	"<p onclick=\"steal()\">Ihr Code: <b>123456</b></p><script>alert(1)</script>\r\n" +
	"--alt--\r\n"

func TestE2ENetSMTP(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)

	msg := strings.ReplaceAll(multipartAlternative, "%s", m.Address)
	if err := smtp.SendMail(h.addr, nil, "joerg@example.org", []string{m.Address}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	got := onlyMessage(t, h, m, cred)
	if got, want := got.From, "Jörg <joerg@example.org>"; got != want {
		t.Errorf("From = %q, want %q", got, want)
	}
	if got, want := got.Subject, "Bestätigung 123456"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	if got, want := got.Status, storage.StatusReady; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
	if got, want := got.Text, "Ihr Code: 123456 – gültig 10 Minuten."; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if !strings.Contains(got.HTML, "<b>123456</b>") {
		t.Errorf("HTML = %q, want the formatted code kept", got.HTML)
	}
	for _, bad := range []string{"<script", "onclick", "alert(1)"} {
		if strings.Contains(got.HTML, bad) {
			t.Errorf("HTML = %q holds %q", got.HTML, bad)
		}
	}
	if time.Since(got.ReceivedAt) > time.Minute || got.ReceivedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("ReceivedAt = %v, want about now", got.ReceivedAt)
	}
}

func TestE2ESwaks(t *testing.T) {
	t.Parallel()
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		t.Fatalf("swaks not installed (deploy/install-deps.sh installs it): %v", err)
	}
	serverTLS, _ := selfSigned(t)
	tests := []struct {
		name string
		args []string
		seen string // a line of swaks's transcript that proves the mode
	}{
		{"plain", nil, "<-  250 2.0.0 OK: queued"},
		{"pipelining", []string{"--pipeline"}, "<-  250 2.0.0 OK: queued"},
		{"STARTTLS", []string{"--tls"}, "<~  250 2.0.0 OK: queued"}, // <~ : read over TLS
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSMTPHarness(t, ingest.Config{TLSConfig: serverTLS})
			m, cred := h.mailbox(t, 10*time.Minute)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"--server", h.addr, "--to", m.Address, "--from", "test@example.org",
				"--helo", "client.example.org", "--header", "Subject: hello from swaks",
				"--body", "your code is 654321"}, tc.args...)
			out, err := exec.CommandContext(ctx, swaks, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("swaks %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !strings.Contains(string(out), tc.seen) {
				t.Errorf("swaks transcript lacks %q:\n%s", tc.seen, out)
			}
			assertNoInternalText(t, serverLines(string(out)))
			got := onlyMessage(t, h, m, cred)
			if got, want := got.From, "test@example.org"; got != want {
				t.Errorf("From = %q, want %q", got, want)
			}
			if got, want := got.Subject, "hello from swaks"; got != want {
				t.Errorf("Subject = %q, want %q", got, want)
			}
			if got, want := got.Text, "your code is 654321"; got != want {
				t.Errorf("Text = %q, want %q", got, want)
			}
			if got, want := got.HTML, ""; got != want {
				t.Errorf("HTML = %q, want %q", got, want)
			}
			if got, want := got.Status, storage.StatusReady; got != want {
				t.Errorf("Status = %q, want %q", got, want)
			}
		})
	}
}

// TestE2ESwaksRefused: swaks sees the refusal of an address that has no
// mailbox and exits non-zero; nothing internal is in what it printed.
func TestE2ESwaksRefused(t *testing.T) {
	t.Parallel()
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		t.Fatalf("swaks not installed (deploy/install-deps.sh installs it): %v", err)
	}
	h := newSMTPHarness(t, ingest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, swaks, "--server", h.addr, "--to", storage.NewTag()+"@mayfly.test",
		"--from", "test@example.org", "--helo", "client.example.org").CombinedOutput()
	if err == nil {
		t.Fatalf("swaks succeeded for an unknown address:\n%s", out)
	}
	if !strings.Contains(string(out), "<** 550 5.1.1 ") {
		t.Errorf("swaks output lacks the 550 5.1.1 refusal:\n%s", out)
	}
	assertNoInternalText(t, serverLines(string(out)))
}

// serverLines keeps the lines of a swaks transcript the server sent.
func serverLines(out string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "<") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// onlyMessage returns the one message of a mailbox.
func onlyMessage(t *testing.T, h *smtpHarness, m storage.Mailbox, cred storage.Credential) storage.Message {
	t.Helper()
	msgs := h.messages(t, m, cred)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

// A sender that sends the same bytes again (a retry after a 451, or after a
// connection lost before the 250) gets 250 and the mailbox holds one copy;
// a different message with the same Message-ID is a second message, and a
// transaction to two mailboxes, one of which already has the message, still
// stores it in the other.
func TestE2ERetryStoredOnce(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	other, otherCred := h.mailbox(t, 10*time.Minute)
	raw := []byte("From: a@example.org\r\nSubject: code 1\r\nMessage-ID: <same@example.org>\r\n\r\nfirst\r\n")
	for range 2 {
		if err := smtp.SendMail(h.addr, nil, "a@example.org", []string{m.Address}, raw); err != nil {
			t.Fatalf("SendMail: %v", err)
		}
	}
	if got := len(h.messages(t, m, cred)); got != 1 {
		t.Fatalf("%d messages after the same bytes twice, want 1", got)
	}
	changed := []byte(strings.Replace(string(raw), "first", "second", 1))
	if err := smtp.SendMail(h.addr, nil, "a@example.org", []string{m.Address, other.Address}, changed); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	if err := smtp.SendMail(h.addr, nil, "a@example.org", []string{m.Address, other.Address}, changed); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	if got := len(h.messages(t, m, cred)); got != 2 {
		t.Errorf("%d messages, want 2: same Message-ID, other bytes", got)
	}
	if got := len(h.messages(t, other, otherCred)); got != 1 {
		t.Errorf("other mailbox: %d messages, want 1", got)
	}
}

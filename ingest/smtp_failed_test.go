package ingest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// TestSMTPFailedReason: a message the parser gives up on is still accepted
// and stored with status failed; why is logged (mailbox tag, message id,
// reason; never content) and counted in mayfly_smtp_failed_messages_total by
// a reason from a fixed set.
func TestSMTPFailedReason(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-CONTENT-7f3a" // in every message; must never reach the log
	tests := []struct {
		reason string
		data   func(to string) string // the message, without the terminator
	}{
		{"too_deep", func(to string) string {
			return strings.TrimSuffix(strings.Replace(nestedMultipart(to, 12), "deep text", secret, 1), ".")
		}},
		{"header_too_large", func(to string) string {
			return "From: <sender@example.org>\r\nTo: <" + to + ">\r\nSubject: " + secret +
				"\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-Pad: " +
				strings.Repeat("x", 70<<10) + "\r\n\r\n" + secret + "\r\n--b--\r\n"
		}},
		{"unparsable", func(string) string { // no header section: the first line is text
			return secret + " is not a header line\r\n\r\n" + secret + "\r\n"
		}},
		{"too_complex", func(string) string { // part headers that overlap: the pre-scan's work bound
			raw, err := os.ReadFile("testdata/mime/overlapping-headers.eml")
			if err != nil {
				t.Fatal(err)
			}
			return string(raw)
		}},
	}
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	s := dialRaw(t, h.addr)
	for _, tc := range tests {
		s.send(transaction(m.Address))
		s.expect("250", "250", "354")
		data := tc.data(m.Address)
		if !strings.HasSuffix(data, "\r\n") {
			data += "\r\n"
		}
		s.send(data + ".\r\n")
		s.expect("250 ")
	}
	msgs := h.messages(t, m, cred)
	if got, want := len(msgs), len(tests); got != want {
		t.Fatalf("mailbox holds %d messages, want %d", got, want)
	}
	logs := h.logs.String()
	for i, tc := range tests {
		msg := msgs[len(msgs)-1-i] // newest first
		if got, want := msg.Status, storage.StatusFailed; got != want {
			t.Errorf("%s: Status = %q, want %q", tc.reason, got, want)
		}
		if got := h.metric(t, "mayfly_smtp_failed_messages_total", "reason", tc.reason); got != 1 {
			t.Errorf("failed_messages_total{reason=%q} = %v, want 1", tc.reason, got)
		}
		line := ""
		for l := range strings.SplitSeq(logs, "\n") {
			if strings.Contains(l, "stored as failed") && strings.Contains(l, "msg="+msg.ID.String()) {
				line = l
			}
		}
		if line == "" {
			t.Errorf("%s: no log line for message %s:\n%s", tc.reason, msg.ID, logs)
			continue
		}
		for _, want := range []string{"level=INFO", "reason=" + tc.reason, "mailbox=" + m.Tag()} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: log line %q lacks %q", tc.reason, line, want)
			}
		}
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the log holds message content:\n%s", logs)
	}
	// The same bytes again are stored once (delivery is idempotent) and
	// counted once.
	s.send(transaction(m.Address))
	s.expect("250", "250", "354")
	s.send(tests[2].data(m.Address) + ".\r\n") // unparsable
	s.expect("250 ")
	if got := h.metric(t, "mayfly_smtp_failed_messages_total", "reason", "unparsable"); got != 1 {
		t.Errorf("after a resend: failed_messages_total{reason=unparsable} = %v, want 1", got)
	}
}

// TestSMTPParseTimeout: a parse still running at the parser's MaxParseTime
// is given up like any message the parser refuses: 250, stored as failed,
// counted as timeout. A deadline of a nanosecond has passed before the
// general path reads its first byte, whatever the machine's load.
func TestSMTPParseTimeout(t *testing.T) {
	t.Parallel()
	h := newSMTPHarnessParser(t, ingest.Config{}, ingest.ParserConfig{MaxParseTime: time.Nanosecond})
	m, cred := h.mailbox(t, 10*time.Minute)
	s := dialRaw(t, h.addr)
	s.send(transaction(m.Address))
	s.expect("250", "250", "354")
	s.send("From: <sender@example.org>\r\nSubject: slow\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n.\r\n")
	s.expect("250 ")
	msgs := h.messages(t, m, cred)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	if got, want := msgs[0].Status, storage.StatusFailed; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
	if got, want := msgs[0].Subject, "slow"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	if got := h.metric(t, "mayfly_smtp_failed_messages_total", "reason", "timeout"); got != 1 {
		t.Errorf("failed_messages_total{reason=timeout} = %v, want 1", got)
	}
}

package ingest_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
)

// Messages are read into reused buffers: three messages on one connection,
// the second far shorter than the first and the third longer than the
// first buffer, are each stored with exactly their own body.
func TestMessagesOnOneConnectionKeepTheirBytes(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	bodies := []string{
		strings.Repeat("a line of the first message, longer than the second\r\n", 300),
		"short",
		strings.Repeat("the third is longer than one 64 KiB buffer\r\n", 2000),
	}
	script := envelope(m.Address)
	for i, body := range bodies {
		if i > 0 {
			script = append(script, step{send: "MAIL FROM:<sender@example.org>", want: "250"},
				step{send: "RCPT TO:<" + m.Address + ">", want: "250"})
		}
		script = append(script, step{send: "DATA", want: "354"},
			step{send: rfc822(m.Address, "m"+strconv.Itoa(i), body), want: "250"})
	}
	converse(t, h.addr, append(script, step{send: "QUIT", want: "221"}))
	got := h.messages(t, m, cred) // newest first
	if len(got) != len(bodies) {
		t.Fatalf("%d messages stored, want %d", len(got), len(bodies))
	}
	for i, body := range bodies {
		msg := got[len(got)-1-i]
		want := strings.TrimSpace(strings.ReplaceAll(body, "\r\n", "\n"))
		if text := strings.TrimSpace(strings.ReplaceAll(msg.Text, "\r\n", "\n")); msg.Subject != "m"+strconv.Itoa(i) || text != want {
			t.Errorf("message %d: subject %q, text of %d bytes (%.40q…), want m%d with its %d bytes", i, msg.Subject, len(text), text, i, len(want))
		}
	}
}

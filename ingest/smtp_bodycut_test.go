package ingest_test

import (
	"fmt"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// TestSMTPBodyCut: a message whose text part and HTML part are each over
// 1 MiB is stored ready, with text_body and html_body each cut to at most
// 1 MiB (ParserConfig.MaxBodyBytes) and ending with the visible mark of the
// cut; the stored message has no other field for it.
func TestSMTPBodyCut(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)

	var text, html strings.Builder
	for i := 0; text.Len() < 3<<19; i++ { // 1.5 MiB
		fmt.Fprintf(&text, "line %07d of a long text part, long enough to pass one mebibyte\r\n", i)
	}
	for i := 0; html.Len() < 3<<19; i++ {
		fmt.Fprintf(&html, "<p>paragraph %07d of a long <b>HTML</b> part</p>\r\n", i)
	}
	raw := "From: <sender@example.org>\r\nTo: <" + m.Address + ">\r\nSubject: big bodies\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n" +
		"--B\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + text.String() +
		"--B\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html.String() + "--B--\r\n"
	if err := smtp.SendMail(h.addr, nil, "sender@example.org", []string{m.Address}, []byte(raw)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}

	msgs := h.messages(t, m, cred)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	got := msgs[0]
	if got, want := got.Status, storage.StatusReady; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
	const maxBody = ingest.DefaultMaxBodyBytes
	for _, b := range []struct{ name, body, start, mark string }{
		{"text_body", got.Text, "line 0000000 of", "\n[… cut by Mayfly at 1 MiB]"},
		{"html_body", got.HTML, "<p>paragraph 0000000 of", "<p>[… cut by Mayfly at 1 MiB]</p>"},
	} {
		if len(b.body) > maxBody || len(b.body) < maxBody-200 {
			t.Errorf("%s has %d bytes, want just under %d", b.name, len(b.body), maxBody)
		}
		if !strings.HasPrefix(b.body, b.start) {
			t.Errorf("%s starts %q, want %q", b.name, b.body[:min(len(b.body), 40)], b.start)
		}
		if !strings.HasSuffix(b.body, b.mark) {
			t.Errorf("%s ends %q, want the mark %q", b.name, b.body[len(b.body)-min(len(b.body), 80):], b.mark)
		}
		if n := strings.Count(b.body, "cut by Mayfly"); n != 1 {
			t.Errorf("%s holds the mark %d times, want 1", b.name, n)
		}
	}
}

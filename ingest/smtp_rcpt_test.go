package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// TestSMTPRefusedRcptCap: a connection gets MaxRefusedRcpts refusals (550,
// unknown mailbox or foreign domain, across EHLOs and transactions); the
// refusal after them is 421 4.7.0 and the connection closes. Recipients that
// exist are still accepted before that.
func TestSMTPRefusedRcptCap(t *testing.T) {
	t.Parallel()
	const limit = 5
	h := newSMTPHarness(t, ingest.Config{MaxRefusedRcpts: limit})
	m, _ := h.mailbox(t, 10*time.Minute)
	s := dialRaw(t, h.addr)
	s.send("MAIL FROM:<sender@example.org>\r\n")
	s.expect("250")
	for i := range limit {
		to := storage.NewTag() + "@" + testDomain
		if i == 2 {
			to = "someone@example.org" // not our domain: counted too
			s.send("RCPT TO:<" + to + ">\r\n")
			s.expect("550 5.7.1")
			// A new EHLO does not reset the count.
			s.send("EHLO again.example.org\r\nMAIL FROM:<sender@example.org>\r\n")
			s.expect("250", "250")
			continue
		}
		s.send("RCPT TO:<" + to + ">\r\n")
		s.expect("550 5.1.1")
	}
	s.send("RCPT TO:<" + m.Address + ">\r\n")
	s.expect("250")
	s.send("RCPT TO:<" + storage.NewTag() + "@" + testDomain + ">\r\n")
	s.expect("421 4.7.0")
	assertClosed(t, s.c, s.r)
	if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", "refused_rcpts"); got != 1 {
		t.Errorf("rejections{reason=refused_rcpts} = %v, want 1", got)
	}

	// The default is 20.
	if got, want := ingest.New(nil, nil, nil, ingest.Config{}, nil, nil).Config().MaxRefusedRcpts, 20; got != want {
		t.Errorf("default MaxRefusedRcpts = %d, want %d", got, want)
	}
}

// TestSMTPRcptASCIICase: recipients match mailboxes ignoring ASCII case
// only. The Kelvin sign (U+212A) and the dotted capital I (U+0130), which
// Unicode case folding maps to "k" and "i", name no mailbox.
func TestSMTPRcptASCIICase(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{Domains: []string{testDomain, "kit.test"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tag := "ki" + storage.NewTag()[2:]
	m, cred, err := h.store.Create(ctx, tag, testDomain, 10*time.Minute, "test-owner")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	tests := []struct {
		to, want string
	}{
		{"\u212A" + tag[1:] + "@" + testDomain, "550 5.1.1"},       // KELVIN SIGN for k
		{"k\u0130" + tag[2:] + "@" + testDomain, "550 5.1.1"},      // İ for i
		{"\u212A\u0130" + tag[2:] + "@" + testDomain, "550 5.1.1"}, // both
		{tag + "@\u212Ait.test", "550 5.7.1"},                      // not our domain kit.test
		{tag + "@k\u0130t.test", "550 5.7.1"},
		{strings.ToUpper(tag) + "@" + strings.ToUpper(testDomain), "250"}, // ASCII case still ignored
	}
	s := dialRaw(t, h.addr)
	s.send("MAIL FROM:<sender@example.org> SMTPUTF8\r\n")
	s.expect("250")
	for _, tc := range tests {
		s.send("RCPT TO:<" + tc.to + ">\r\n")
		_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		lines, err := readReply(s.r)
		if err != nil {
			t.Fatalf("RCPT %q: %v", tc.to, err)
		}
		if got := lines[len(lines)-1]; !strings.HasPrefix(got, tc.want) {
			t.Errorf("RCPT %q: %q, want %q", tc.to, got, tc.want)
		}
	}
	s.send("DATA\r\n")
	s.expect("354")
	s.send(header(m.Address, "ascii only") + "body\r\n.\r\n")
	s.expect("250")
	if got, want := onlyMessage(t, h, m, cred).Subject, "ascii only"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
}

package ingest_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// TestSMTPConversations runs scripted conversations over a real listener in
// front of the real cluster, one server per case, and checks every reply
// and what ended up stored.
func TestSMTPConversations(t *testing.T) {
	t.Parallel()
	type box struct {
		m    storage.Mailbox
		cred storage.Credential
	}
	tests := []struct {
		name  string
		cfg   ingest.Config
		boxes int // live mailboxes created before the script, lifetime 10 min
		// expired mailboxes come first in the script's boxes: they lived
		// 300 ms and are past their expiry when the script starts.
		expired int
		// script builds the conversation; h and boxes are the case's own.
		script func(h *smtpHarness, b []box) []step
		// stored is how many messages each box holds afterwards.
		stored []int
		// status, if set, is the status of every stored message.
		status storage.Status
	}{
		{
			name: "EHLO advertises SIZE, 8BITMIME, SMTPUTF8, PIPELINING and no STARTTLS without a certificate",
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220 localhost ESMTP"},
					{send: "EHLO client.example.org", want: "250 ",
						has:   []string{"SIZE 10485760", "8BITMIME", "SMTPUTF8", "PIPELINING", "ENHANCEDSTATUSCODES"},
						lacks: []string{"STARTTLS"}},
					{send: "QUIT", want: "221"},
				}
			},
		},
		{
			name: "SIZE follows MaxMessageBytes",
			cfg:  ingest.Config{MaxMessageBytes: 4096, Hostname: "mx.mayfly.test"},
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220 mx.mayfly.test ESMTP"},
					{send: "EHLO client.example.org", want: "250 ", has: []string{"SIZE 4096"}},
				}
			},
		},
		{
			name:  "one recipient is delivered",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "hello", "your code is 123456"), want: "250 2.0.0"},
					step{send: "QUIT", want: "221"})
			},
			stored: []int{1},
			status: storage.StatusReady,
		},
		{
			name: "a domain that is not ours is refused: 550 5.7.1",
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "250"},
					{send: "RCPT TO:<someone@example.org>", want: "550 5.7.1"},
					{send: "RCPT TO:<" + storage.NewTag() + "@mayfly.test.evil.org>", want: "550 5.7.1"},
				}
			},
		},
		{
			name: "an unknown address of our domain is refused: 550 5.1.1",
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "250"},
					{send: "RCPT TO:<" + storage.NewTag() + "@mayfly.test>", want: "550 5.1.1"},
					{send: "RCPT TO:<not-a-mayfly-tag@mayfly.test>", want: "550 5.1.1"},
					{send: "DATA", want: "502"}, // no recipient was accepted
				}
			},
		},
		{
			name:  "a deleted mailbox is refused: 550 5.1.1",
			boxes: 1,
			script: func(h *smtpHarness, b []box) []step {
				return []step{
					{want: "220", do: func(t *testing.T) { h.destroy(t, b[0].m, b[0].cred) }},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "250"},
					{send: "RCPT TO:<" + b[0].m.Address + ">", want: "550 5.1.1"},
				}
			},
		},
		{
			name:    "an expired mailbox is refused: 550 5.1.1",
			expired: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "250"},
					{send: "RCPT TO:<" + b[0].m.Address + ">", want: "550 5.1.1"},
				}
			},
		},
		{
			name:  "matching is case-insensitive",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				upper := strings.ToUpper(b[0].m.Address)
				return append(envelope(upper),
					step{send: "DATA", want: "354"},
					step{send: rfc822(upper, "upper", "case"), want: "250"})
			},
			stored: []int{1},
		},
		{
			name:  "several recipients are each delivered, a repeated one once",
			boxes: 3,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "RCPT TO:<" + b[1].m.Address + ">", want: "250"},
					step{send: "RCPT TO:<" + strings.ToUpper(b[0].m.Address) + ">", want: "250"},
					step{send: "RCPT TO:<" + b[2].m.Address + ">", want: "250"},
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "to many", "hi all"), want: "250"})
			},
			stored: []int{1, 1, 1},
		},
		{
			name:  "recipients past the cap get 452 4.5.3, the others are delivered",
			cfg:   ingest.Config{MaxRecipients: 2},
			boxes: 3,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "RCPT TO:<" + b[1].m.Address + ">", want: "250"},
					step{send: "RCPT TO:<" + b[2].m.Address + ">", want: "452 4.5.3"},
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "capped", "two of three"), want: "250"})
			},
			stored: []int{1, 1, 0},
		},
		{
			name:  "a declared SIZE over the limit is refused: 552 5.3.4",
			cfg:   ingest.Config{MaxMessageBytes: 4096},
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org> SIZE=4097", want: "552 5.3.4"},
					{send: "MAIL FROM:<sender@example.org> SIZE=4000", want: "250"},
					{send: "RCPT TO:<" + b[0].m.Address + ">", want: "250"},
				}
			},
		},
		{
			name:  "a message over the limit is refused: 552 5.3.4, and the session goes on",
			cfg:   ingest.Config{MaxMessageBytes: 4096},
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "big", strings.Repeat("0123456789abcdef\r\n", 300)), want: "552 5.3.4"},
					step{send: "MAIL FROM:<sender@example.org>", want: "250"},
					step{send: "RCPT TO:<" + b[0].m.Address + ">", want: "250"},
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "small", "fits"), want: "250"})
			},
			stored: []int{1},
		},
		{
			name:  "a line of 100 KiB is accepted (go-smtp's default limit of 2000 is raised)",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "long line", strings.Repeat("x", 100<<10)), want: "250"})
			},
			stored: []int{1},
		},
		{
			name:  "a line over MaxLineLength in DATA gets 500 5.5.2 and the connection closes",
			cfg:   ingest.Config{MaxLineLength: 1000},
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "long line", strings.Repeat("x", 2000)), want: "500 5.5.2"},
					step{send: "NOOP", want: wantClosed})
			},
			stored: []int{0},
		},
		{
			// go-smtp answers an over-long command line itself, with its own
			// fixed reply; docs/api.md documents it as such.
			name:  "a command line over MaxLineLength gets go-smtp's 500 5.4.0 and the connection closes",
			cfg:   ingest.Config{MaxLineLength: 1000},
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return []step{{want: "220"}, {send: "EHLO client.example.org", want: "250"},
					{send: "NOOP " + strings.Repeat("x", 2000), want: "500 5.4.0"},
					{send: "NOOP", want: wantClosed}}
			},
			stored: []int{0},
		},
		{
			name:  "CHUNKING: BDAT delivers like DATA",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				msg := strings.TrimSuffix(rfc822(b[0].m.Address, "chunked", "in one chunk"), ".")
				return append(envelope(b[0].m.Address),
					// converse appends CRLF: it is part of the chunk.
					step{send: "BDAT " + strconv.Itoa(len(msg)) + " LAST\r\n" + strings.TrimSuffix(msg, "\r\n"), want: "250"})
			},
			stored: []int{1},
		},
		{
			name:  "RSET ends the transaction",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "RSET", want: "250"},
					step{send: "DATA", want: "502"},
					step{send: "MAIL FROM:<other@example.org>", want: "250"},
					step{send: "RCPT TO:<" + b[0].m.Address + ">", want: "250"},
					step{send: "DATA", want: "354"},
					step{send: rfc822(b[0].m.Address, "after rset", "x"), want: "250"})
			},
			stored: []int{1},
		},
		{
			name:  "a mailbox deleted between RCPT and DATA: 550 5.1.1",
			boxes: 1,
			script: func(h *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354", do: func(t *testing.T) { h.destroy(t, b[0].m, b[0].cred) }},
					step{send: rfc822(b[0].m.Address, "late", "x"), want: "550 5.1.1"})
			},
		},
		{
			name:  "one of two mailboxes deleted between RCPT and DATA: 250, the other is delivered",
			boxes: 2,
			script: func(h *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "RCPT TO:<" + b[1].m.Address + ">", want: "250"},
					step{send: "DATA", want: "354", do: func(t *testing.T) { h.destroy(t, b[1].m, b[1].cred) }},
					step{send: rfc822(b[0].m.Address, "half", "x"), want: "250"})
			},
			stored: []int{1, -1}, // -1: the mailbox is gone
		},
		{
			name:  "a message enmime cannot take is still accepted (stored as failed)",
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: nestedMultipart(b[0].m.Address, 30), want: "250"})
			},
			stored: []int{1},
			status: storage.StatusFailed,
		},
		{
			name: "unknown commands and bad syntax get go-smtp's fixed replies",
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220"},
					{send: "MAIL FROM:<a@example.org>", want: "502"}, // before EHLO
					{send: "EHLO client.example.org", want: "250"},
					{send: "RCPT TO:<x@mayfly.test>", want: "502"}, // before MAIL
					{send: "MAIL FROM:bad", want: "501"},
					{send: "VRFY x@mayfly.test", want: "252"},
					{send: "NOOP", want: "250"},
				}
			},
		},
		{
			name: "the per-IP transaction rule: 421 4.7.0 and the connection closes",
			cfg:  ingest.Config{MailRule: ratelimit.Rule{Limit: 1}},
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "250"},
					{send: "RSET", want: "250"},
					{send: "MAIL FROM:<sender@example.org>", want: "421 4.7.0"},
					{send: "NOOP", want: wantClosed},
				}
			},
		},
		{
			name: "an idle client gets 421 4.4.2 after ReadTimeout",
			cfg:  ingest.Config{ReadTimeout: time.Second},
			script: func(*smtpHarness, []box) []step {
				return []step{
					{want: "220"},
					{send: "EHLO client.example.org", want: "250"},
					{want: "421 4.4.2", wait: 3 * time.Second},
					{want: wantClosed},
				}
			},
		},
		{
			name:  "a client that stalls in DATA gets 421 4.4.2 after DataTimeout",
			cfg:   ingest.Config{DataTimeout: 500 * time.Millisecond},
			boxes: 1,
			script: func(_ *smtpHarness, b []box) []step {
				return append(envelope(b[0].m.Address),
					step{send: "DATA", want: "354"},
					step{send: "Subject: slow\r\n\r\nhalf a message", want: "421 4.4.2", wait: 3 * time.Second},
					step{want: wantClosed})
			},
			stored: []int{0},
		},
		{
			name: "a session that outlives SessionTimeout gets 421 4.4.2, however busy",
			cfg:  ingest.Config{SessionTimeout: 1500 * time.Millisecond}, // the NOOPs take 300 ms and more
			script: func(*smtpHarness, []box) []step {
				s := []step{{want: "220"}, {send: "EHLO client.example.org", want: "250"}}
				for range 3 {
					s = append(s, step{send: "NOOP", want: "250", do: func(*testing.T) { time.Sleep(100 * time.Millisecond) }})
				}
				return append(s, step{want: "421 4.4.2", wait: 3 * time.Second})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSMTPHarness(t, tc.cfg)
			if tc.cfg.MailRule.Limit > 0 {
				roomInWindow(t, tc.cfg.MailRule.Window, 10*time.Second)
			}
			boxes := make([]box, tc.expired+tc.boxes)
			for i := range boxes {
				life := 10 * time.Minute
				if i < tc.expired {
					life = 300 * time.Millisecond
				}
				boxes[i].m, boxes[i].cred = h.mailbox(t, life)
			}
			if tc.expired > 0 {
				time.Sleep(400 * time.Millisecond)
			}
			converse(t, h.addr, tc.script(h, boxes))
			for i, want := range tc.stored {
				if want < 0 {
					continue
				}
				msgs := h.messages(t, boxes[i].m, boxes[i].cred)
				if got := len(msgs); got != want {
					t.Errorf("mailbox %d holds %d messages, want %d", i, got, want)
				}
				for _, m := range msgs {
					if tc.status != "" && m.Status != tc.status {
						t.Errorf("mailbox %d: message %q has status %q, want %q", i, m.Subject, m.Status, tc.status)
					}
				}
			}
		})
	}
}

// nestedMultipart is a message nested depth multiparts deep: over the
// parser's depth limit, so it is stored as failed.
func nestedMultipart(to string, depth int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: <sender@example.org>\r\nTo: <%s>\r\nSubject: deep\r\nMIME-Version: 1.0\r\n", to)
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\ndeep text\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	b.WriteString(".")
	return b.String()
}

package ingest_test

import (
	"errors"
	"fmt"
	"net/netip"
	"net/smtp"
	"net/textproto"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
)

// TestSMTPRelayAllowance: a burst of 80 messages, one connection each (a
// Postfix relay with smtp_tls_connection_reuse = no), is stored whole by a
// node whose Relays hold the client, counted against the relay rules; a node
// without gets 421 4.7.0 at connect past ConnRule's 60 a minute.
func TestSMTPRelayAllowance(t *testing.T) {
	t.Parallel()
	const burst = 80
	for _, tc := range []struct {
		name     string
		relays   []netip.Prefix
		accepted int
	}{
		{"relay", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, burst},
		{"not a relay", nil, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSMTPHarness(t, ingest.Config{Relays: tc.relays})
			m, cred := h.mailbox(t, 10*time.Minute)
			roomInWindow(t, 0, 20*time.Second) // the burst is in one window of the rules

			accepted, refused := 0, 0
			for i := range burst {
				msg := fmt.Sprintf("From: <relay@example.org>\r\nTo: <%s>\r\nSubject: burst %d\r\n\r\nrelayed\r\n", m.Address, i)
				err := smtp.SendMail(h.addr, nil, "relay@example.org", []string{m.Address}, []byte(msg))
				var perr *textproto.Error
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &perr) && perr.Code == 421:
					refused++
				default:
					t.Fatalf("message %d: %v", i, err)
				}
			}
			t.Logf("%s: %d of %d messages accepted, %d refused with 421", tc.name, accepted, burst, refused)
			if accepted != tc.accepted || refused != burst-tc.accepted {
				t.Errorf("%d accepted and %d refused, want %d and %d", accepted, refused, tc.accepted, burst-tc.accepted)
			}
			if got := len(h.messages(t, m, cred)); got != tc.accepted {
				t.Errorf("mailbox holds %d messages, want %d", got, tc.accepted)
			}
			if got, want := h.metric(t, "mayfly_smtp_rejections_total", "reason", "conn_rate"), float64(burst-tc.accepted); got != want {
				t.Errorf("rejections{conn_rate} = %v, want %v", got, want)
			}
		})
	}
}

// TestSMTPRelayMailAllowance: a relay that reuses its connection
// (smtp_tls_connection_reuse = yes) counts its transactions against
// RelayMailRule; any other client gets 421 4.7.0 at the MAIL past
// MailRule's 120 a minute.
func TestSMTPRelayMailAllowance(t *testing.T) {
	t.Parallel()
	const transactions = 150
	for _, tc := range []struct {
		name     string
		relays   []netip.Prefix
		accepted int
	}{
		{"relay", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, transactions},
		{"not a relay", nil, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newSMTPHarness(t, ingest.Config{Relays: tc.relays})
			roomInWindow(t, 0, 20*time.Second)
			c, err := smtp.Dial(h.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Hello("relay.example.org"); err != nil {
				t.Fatal(err)
			}
			accepted := 0
			for ; accepted < transactions; accepted++ {
				if err := c.Mail("relay@example.org"); err != nil {
					var perr *textproto.Error
					if !errors.As(err, &perr) || perr.Code != 421 {
						t.Fatalf("MAIL %d: %v, want 250 or 421", accepted+1, err)
					}
					break
				}
				if err := c.Reset(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: %d of %d MAIL commands on one connection accepted", tc.name, accepted, transactions)
			if accepted != tc.accepted {
				t.Errorf("%d MAIL commands accepted, want %d", accepted, tc.accepted)
			}
		})
	}
}

package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/smtp"
	"net/textproto"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

// TestSMTPSubaddressDelivered: mail to local+tag@domain (net/smtp) lands in
// the inbox local@domain with To the address as accepted, lower-cased. One
// transaction to the inbox, two tags and one of them again in other case
// stores one message per distinct address, each with its own To; the
// sender's retry of the same bytes stores nothing new.
func TestSMTPSubaddressDelivered(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	tag := m.Tag() + "+signup-42@" + testDomain

	raw := []byte("From: <sender@example.org>\r\nTo: <" + tag + ">\r\nSubject: welcome\r\n\r\ncode 123456\r\n")
	if err := smtp.SendMail(h.addr, nil, "sender@example.org", []string{strings.ToUpper(m.Tag()) + "+SignUp-42@" + strings.ToUpper(testDomain)}, raw); err != nil {
		t.Fatalf("SendMail to a sub-address: %v", err)
	}
	got := onlyMessage(t, h, m, cred)
	if got.To != tag || got.Subject != "welcome" || got.Text != "code 123456" {
		t.Fatalf("message = To %q Subject %q Text %q; want To %q", got.To, got.Subject, got.Text, tag)
	}

	other := m.Tag() + "+reset.pw_1@" + testDomain
	two := []byte("From: <sender@example.org>\r\nSubject: both\r\n\r\nto several\r\n")
	rcpts := []string{m.Address, tag, strings.ToUpper(tag), other}
	for range 2 { // the second is the sender's retry
		if err := smtp.SendMail(h.addr, nil, "sender@example.org", rcpts, two); err != nil {
			t.Fatalf("SendMail to %v: %v", rcpts, err)
		}
	}
	var tos []string
	for _, msg := range h.messages(t, m, cred) {
		if msg.Subject == "both" {
			tos = append(tos, msg.To)
		}
	}
	slices.Sort(tos)
	want := []string{m.Address, tag, other}
	slices.Sort(want)
	if !slices.Equal(tos, want) {
		t.Errorf("messages of the transaction to %v: To = %v, want one each for %v", rcpts, tos, want)
	}
}

// TestSMTPSubaddressRefused: every malformed sub-address is refused at RCPT
// with 553 5.1.3 and the rule in the text; a well-formed tag on an address
// with no live inbox is refused as that address is (550 5.1.1), and the
// recipients that are fine are still accepted in the same transaction.
func TestSMTPSubaddressRefused(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxRefusedRcpts: 100})
	m, cred := h.mailbox(t, 10*time.Minute)
	local := m.Tag()
	const tagRule = "553 5.1.3 Bad sub-address tag: 1-64 of A-Z a-z 0-9 . _ - after the first +"
	const lengthRule = "553 5.1.3 Bad sub-address: local part over 64 octets"
	const unknown = "550 5.1.1 No such mailbox: unknown, expired or deleted"
	tests := []struct{ to, want string }{
		{local + "+@" + testDomain, tagRule},
		{local + "+a+b@" + testDomain, tagRule},
		{local + "++@" + testDomain, tagRule},
		{local + "+a!b@" + testDomain, tagRule},
		{local + "+a=b@" + testDomain, tagRule},
		{local + "+a%b@" + testDomain, tagRule},
		{local + "+\u00e9t\u00e9@" + testDomain, tagRule},
		{local + "+" + strings.Repeat("x", 65) + "@" + testDomain, tagRule},
		{local + "+" + strings.Repeat("x", 64-len(local)) + "@" + testDomain, lengthRule},
		{storage.NewTag() + "+signup@" + testDomain, unknown},
		{storage.NewTag() + "@" + testDomain, unknown},
		{"nobody+signup@" + testDomain, unknown},
		{local + "+signup@example.org", "550 5.7.1"},
		{local + "+" + strings.Repeat("x", 63-len(local)) + "@" + testDomain, "250"},
		{local + "+ok@" + testDomain, "250"},
	}
	c, err := smtp.Dial(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("sender@example.org"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		err := c.Rcpt(tt.to)
		var te *textproto.Error
		switch {
		case tt.want == "250" && err != nil:
			t.Errorf("RCPT %q: %v, want 250", tt.to, err)
		case tt.want == "250":
		case !errors.As(err, &te):
			t.Errorf("RCPT %q: %v, want %q", tt.to, err, tt.want)
		case !strings.HasPrefix(fmt.Sprintf("%d %s", te.Code, te.Msg), tt.want):
			t.Errorf("RCPT %q: %d %s, want %q", tt.to, te.Code, te.Msg, tt.want)
		}
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("Subject: accepted ones\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	_ = c.Quit()
	if got := len(h.messages(t, m, cred)); got != 2 {
		t.Errorf("%d messages stored, want 2 (the accepted sub-addresses)", got)
	}
	for reason, want := range map[string]float64{"bad_subaddress": 8, "local_part_too_long": 1, "no_mailbox": 3} {
		if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", reason); got != want {
			t.Errorf("rejections{reason=%s} = %v, want %v", reason, got, want)
		}
	}
}

// TestSMTPSubaddressOldLayout: a node writing a layout before 2026-11-27
// (a rolling upgrade's first step) answers every sub-address, malformed or
// not, 550 5.1.1 as the releases before it do, and stores nothing for it;
// the inbox's own address is delivered as before.
func TestSMTPSubaddressOldLayout(t *testing.T) {
	t.Parallel()
	client := storagetest.Client(t)
	prefix := storagetest.Prefix(t)
	store := storage.New(client, storage.Config{KeyPrefix: prefix, WriteLayout: storage.Layout20261126})
	h := serveSMTP(t, store, ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix}), ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	for _, to := range []string{m.Tag() + "+signup@" + testDomain, m.Tag() + "+@" + testDomain, m.Tag() + "+a!b@" + testDomain} {
		err := smtp.SendMail(h.addr, nil, "sender@example.org", []string{to}, []byte("Subject: x\r\n\r\nx\r\n"))
		var te *textproto.Error
		if !errors.As(err, &te) || te.Code != 550 || !strings.HasPrefix(te.Msg, "5.1.1 ") {
			t.Errorf("SendMail to %q on layout %s: %v, want 550 5.1.1", to, store.WriteLayout(), err)
		}
	}
	if err := smtp.SendMail(h.addr, nil, "sender@example.org", []string{m.Address}, []byte("Subject: own\r\n\r\nx\r\n")); err != nil {
		t.Fatalf("SendMail to the inbox: %v", err)
	}
	if got := onlyMessage(t, h, m, cred); got.Subject != "own" || got.To != m.Address {
		t.Errorf("message = %q to %q, want %q to %q", got.Subject, got.To, "own", m.Address)
	}
}

// TestE2ESwaksSubaddress: swaks delivers to a sub-address like any sender.
func TestE2ESwaksSubaddress(t *testing.T) {
	t.Parallel()
	swaks, err := exec.LookPath("swaks")
	if err != nil {
		t.Fatalf("swaks not installed (deploy/install-deps.sh installs it): %v", err)
	}
	h := newSMTPHarness(t, ingest.Config{})
	m, cred := h.mailbox(t, 10*time.Minute)
	to := m.Tag() + "+Swaks.Run-1@" + testDomain
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, swaks, "--server", h.addr, "--to", to, "--from", "sender@example.org",
		"--header", "Subject: via swaks", "--body", "code 777").CombinedOutput()
	if err != nil {
		t.Fatalf("swaks: %v\n%s", err, out)
	}
	got := onlyMessage(t, h, m, cred)
	if want := strings.ToLower(to); got.To != want || got.Subject != "via swaks" {
		t.Errorf("message = %q to %q, want %q to %q", got.Subject, got.To, "via swaks", want)
	}
	out, _ = exec.CommandContext(ctx, swaks, "--server", h.addr, "--to", m.Tag()+"+bad/tag@"+testDomain,
		"--from", "sender@example.org", "--quit-after", "RCPT").CombinedOutput()
	if !strings.Contains(string(out), "<** 553 5.1.3 Bad sub-address tag") {
		t.Errorf("swaks to a malformed tag:\n%s\nwant the 553 5.1.3 refusal", out)
	}
}

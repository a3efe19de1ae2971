package ingest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
)

// selfSigned returns a server TLS config with a fresh self-signed
// certificate for localhost and 127.0.0.1, and a client config that trusts
// only it.
func selfSigned(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// TestSMTPStartTLS: with a certificate, EHLO advertises STARTTLS; after the
// handshake it no longer does, and mail is delivered over TLS.
func TestSMTPStartTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := selfSigned(t)
	h := newSMTPHarness(t, ingest.Config{TLSConfig: serverTLS})
	m, cred := h.mailbox(t, 10*time.Minute)

	converse(t, h.addr, []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250 ", has: []string{"STARTTLS", "SIZE 10485760"}},
	})

	c, err := smtp.Dial(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.example.org"); err != nil {
		t.Fatal(err)
	}
	if err := c.StartTLS(clientTLS); err != nil {
		t.Fatalf("StartTLS: %v", err)
	}
	if state, ok := c.TLSConnectionState(); !ok || !state.HandshakeComplete {
		t.Fatalf("TLS handshake not complete: %v", ok)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Error("STARTTLS is advertised again inside TLS")
	}
	if err := c.Mail("sender@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(m.Address); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("From: <sender@example.org>\r\nSubject: over tls\r\n\r\nencrypted hello\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("end of DATA: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	msgs := h.messages(t, m, cred)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	if got, want := msgs[0].Subject, "over tls"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	if got, want := msgs[0].Status, storage.StatusReady; got != want {
		t.Errorf("Status = %q, want %q", got, want)
	}
}

// TestSMTPRequireTLS: with RequireTLS, MAIL before STARTTLS gets 530 5.7.0
// (RFC 3207) and the session goes on; after STARTTLS the same connection
// delivers. Without it, plain MAIL is accepted as before.
func TestSMTPRequireTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := selfSigned(t)
	h := newSMTPHarness(t, ingest.Config{TLSConfig: serverTLS, RequireTLS: true})
	m, cred := h.mailbox(t, 10*time.Minute)

	converse(t, h.addr, []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250 ", has: []string{"STARTTLS"}},
		{send: "MAIL FROM:<sender@example.org>", want: "530 5.7.0 Must issue a STARTTLS command first"},
		{send: "RCPT TO:<" + m.Address + ">", want: "502 5.5.1"}, // go-smtp: no MAIL
		{send: "NOOP", want: "250"},
	})

	c, err := smtp.Dial(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.example.org"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("sender@example.org"); err == nil || !strings.HasPrefix(err.Error(), "530 ") {
		t.Fatalf("MAIL before STARTTLS: %v, want 530", err)
	}
	if err := c.StartTLS(clientTLS); err != nil {
		t.Fatalf("StartTLS: %v", err)
	}
	if err := c.Mail("sender@example.org"); err != nil {
		t.Fatalf("MAIL after STARTTLS: %v", err)
	}
	if err := c.Rcpt(m.Address); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("From: <sender@example.org>\r\nSubject: required tls\r\n\r\nhello\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("end of DATA: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	if msgs := h.messages(t, m, cred); len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", "tls_required"); got != 2 {
		t.Errorf("rejections{reason=tls_required} = %v, want 2", got)
	}

	plain := newSMTPHarness(t, ingest.Config{TLSConfig: serverTLS})
	converse(t, plain.addr, []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250 "},
		{send: "MAIL FROM:<sender@example.org>", want: "250"},
	})
}

// TestSMTPTLSMetrics: every STARTTLS handshake is counted, a completed one
// by its TLS version (mayfly_smtp_tls_sessions_total), a failed one in
// mayfly_smtp_tls_handshake_failures_total: a client that offers only TLS
// 1.1 (below the floor) and one that sends plain text after STARTTLS.
func TestSMTPTLSMetrics(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := selfSigned(t)
	h := newSMTPHarness(t, ingest.Config{TLSConfig: serverTLS})

	startTLS := func(cfg *tls.Config) error {
		c, err := smtp.Dial(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Hello("client.example.org"); err != nil {
			t.Fatal(err)
		}
		if err := c.StartTLS(cfg); err != nil {
			return err
		}
		return c.Quit()
	}
	if err := startTLS(clientTLS); err != nil {
		t.Fatalf("StartTLS (TLS 1.3): %v", err)
	}
	tls12 := clientTLS.Clone()
	tls12.MaxVersion = tls.VersionTLS12
	if err := startTLS(tls12); err != nil {
		t.Fatalf("StartTLS (TLS 1.2): %v", err)
	}
	tls11 := clientTLS.Clone()
	tls11.MinVersion, tls11.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if err := startTLS(tls11); err == nil {
		t.Fatal("StartTLS with only TLS 1.1 succeeded, want a handshake failure")
	}
	converse(t, h.addr, []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250 "},
		{send: "STARTTLS", want: "220"},
		{send: "this is not a TLS ClientHello", want: "550"},
	})

	// The server counts a failure after its alert, which the client may
	// read first.
	waitFor(t, func() bool { return h.metric(t, "mayfly_smtp_tls_handshake_failures_total") == 2 })
	for _, tt := range []struct {
		version string
		want    float64
	}{{"1.3", 1}, {"1.2", 1}, {"other", 0}} {
		if got := h.metric(t, "mayfly_smtp_tls_sessions_total", "version", tt.version); got != tt.want {
			t.Errorf("mayfly_smtp_tls_sessions_total{version=%q} = %v, want %v", tt.version, got, tt.want)
		}
	}
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// tlsNode runs `mayfly ingest` with STARTTLS from the files cert.pem and
// key.pem of a directory the test rewrites, the certificate polled every
// reload. It returns the SMTP address, the directory and the node's log.
func tlsNode(t *testing.T, first storagetest.Certs, reload string) (addr, dir string, logged *syncBuffer) {
	t.Helper()
	dir = t.TempDir()
	swapCert(t, dir, first)
	env := testEnv(t, map[string]string{
		"MAYFLY_REDIS_PREFIX":    storagetest.Prefix(t),
		"MAYFLY_SMTP_ADDR":       "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":      "127.0.0.1:0",
		"MAYFLY_SMTP_TLS_CERT":   filepath.Join(dir, "cert.pem"),
		"MAYFLY_SMTP_TLS_KEY":    filepath.Join(dir, "key.pem"),
		"MAYFLY_SMTP_TLS_RELOAD": reload,
	})
	ctx, cancel := context.WithCancel(context.Background())
	logs, logw := io.Pipe()
	logged = &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ingest"}, environ(env), io.Discard, io.MultiWriter(logw, logged))
		logw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return listeningAddrs(t, logs, "smtp")["smtp"], dir, logged
}

// swapCert puts c's certificate and key in dir as cert.pem and key.pem, each
// written beside and renamed over the old one, as a renewal does.
func swapCert(t *testing.T, dir string, c storagetest.Certs) {
	t.Helper()
	for from, to := range map[string]string{c.Cert: "cert.pem", c.Key: "key.pem"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeRenamed(t, filepath.Join(dir, to), b)
	}
}

func writeRenamed(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// serial is the serial number of the certificate STARTTLS presents at addr,
// verified against the CAs of certs.
func serial(t *testing.T, addr string, certs ...storagetest.Certs) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	for _, c := range certs {
		b, err := os.ReadFile(c.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StartTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	state, _ := c.TLSConnectionState()
	return state.PeerCertificates[0].SerialNumber
}

func certSerial(t *testing.T, c storagetest.Certs) *big.Int {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.SerialNumber
}

// TestSMTPTLSReload: a certificate renewed on disk is presented by the next
// STARTTLS within the poll interval, without a restart; a broken pair keeps
// the previous certificate and is logged as an error. Before, the
// certificate was loaded once at start.
func TestSMTPTLSReload(t *testing.T) {
	t.Parallel()
	a, b := storagetest.NewCerts(t), storagetest.NewCerts(t)
	addr, dir, logged := tlsNode(t, a, "200ms")
	if got, want := serial(t, addr, a, b), certSerial(t, a); got.Cmp(want) != 0 {
		t.Fatalf("serial = %x, want A's %x", got, want)
	}

	swapCert(t, dir, b)
	want := certSerial(t, b)
	deadline := time.Now().Add(3 * time.Second)
	for got := serial(t, addr, a, b); got.Cmp(want) != 0; got = serial(t, addr, a, b) {
		if time.Now().After(deadline) {
			t.Fatalf("serial = %x 3 s after the swap, want B's %x", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("STARTTLS serial %x before the swap, %x after", certSerial(t, a), want)

	writeRenamed(t, filepath.Join(dir, "cert.pem"), []byte("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n"))
	for deadline := time.Now().Add(3 * time.Second); !strings.Contains(logged.String(), "tls certificate not reloaded"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged 3 s after a broken certificate; log:\n%s", logged)
		}
	}
	if got := serial(t, addr, a, b); got.Cmp(want) != 0 {
		t.Errorf("serial = %x after a broken certificate, want B's %x still", got, want)
	}
	if !strings.Contains(logged.String(), `"level":"ERROR"`) {
		t.Errorf("the broken certificate is not logged at error; log:\n%s", logged)
	}
}

// TestSMTPTLSReloadOnSIGHUP: SIGHUP loads the files at once (the poll here
// would wait an hour) and does not stop the node.
func TestSMTPTLSReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	a, b := storagetest.NewCerts(t), storagetest.NewCerts(t)
	addr, dir, _ := tlsNode(t, a, "1h")
	swapCert(t, dir, b)
	if got, want := serial(t, addr, a, b), certSerial(t, a); got.Cmp(want) != 0 {
		t.Fatalf("serial = %x before SIGHUP, want A's %x (no poll within the hour)", got, want)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := certSerial(t, b)
	deadline := time.Now().Add(3 * time.Second)
	for got := serial(t, addr, a, b); got.Cmp(want) != 0; got = serial(t, addr, a, b) {
		if time.Now().After(deadline) {
			t.Fatalf("serial = %x 3 s after SIGHUP, want B's %x", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

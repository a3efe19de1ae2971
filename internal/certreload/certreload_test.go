package certreload_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/internal/certreload"
	"github.com/mayfly/mayfly/storage/storagetest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}

// serving waits up to 2 s for the reloader to serve want's certificate.
func serving(t *testing.T, r *certreload.Reloader, want storagetest.Certs) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(want.Cert, want.Key)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, _ := r.GetCertificate(nil); bytes.Equal(c.Certificate[0], pair.Certificate[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serial %x served 2 s on, want %s's", r.Certificate().SerialNumber, want.Cert)
		}
	}
}

// The watch loads a changed pair; a broken one keeps the certificate served
// and is logged once, however many polls see it; the pair repaired is
// loaded again.
func TestWatch(t *testing.T) {
	a, b := storagetest.NewCerts(t), storagetest.NewCerts(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	copyFile(t, a.Cert, cert)
	copyFile(t, a.Key, key)
	var logged syncBuffer
	r, err := certreload.New(cert, key, slog.New(slog.NewJSONHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, 20*time.Millisecond)
	serving(t, r, a)

	copyFile(t, b.Cert, cert)
	copyFile(t, b.Key, key)
	serving(t, r, b)

	// A's key under B's certificate: does not load.
	copyFile(t, a.Key, key)
	time.Sleep(200 * time.Millisecond) // ten polls
	serving(t, r, b)
	if got := strings.Count(logged.String(), "tls certificate not reloaded"); got != 1 {
		t.Errorf("a broken pair logged %d times over ten polls, want once:\n%s", got, logged.String())
	}
	copyFile(t, a.Cert, cert)
	serving(t, r, a)
	if err := r.Reload(); err != nil {
		t.Errorf("Reload of a good pair: %v", err)
	}
}

// New refuses a pair that does not load: the node's start fails.
func TestNewRefusesABrokenPair(t *testing.T) {
	a, b := storagetest.NewCerts(t), storagetest.NewCerts(t)
	if _, err := certreload.New(a.Cert, b.Key, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("New accepted a key of another certificate")
	}
}

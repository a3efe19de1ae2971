// Package certreload serves a TLS certificate from a pair of PEM files and
// loads it again when the files change, so that a renewed certificate (an
// ACME client, a mounted Kubernetes Secret) is served without a restart.
// A pair that does not load (half written, a key that does not match) keeps
// the certificate already served and is logged; the next change is tried
// again.
//
// It polls the files' modification time and size rather than watching
// them: a poll sees a Secret's atomic symlink swap and a file replaced by
// rename alike, and needs no dependency. It reads no environment: cmd/mayfly
// says which files and how often.
package certreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Reloader holds the certificate loaded last from CertFile and KeyFile.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp stamp // of the files when they were last tried, loaded or not
}

// stamp is what the poll compares: a change of either file's modification
// time or size is a change of the pair.
type stamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// New loads the pair once; an error here is the node's configuration error.
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	st, _ := r.stat()
	cert, err := load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp = cert, st
	log.Info("tls certificate loaded", "cert", certFile,
		"serial", cert.Leaf.SerialNumber.Text(16), "not_after", cert.Leaf.NotAfter.UTC())
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate: the certificate loaded last.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// Certificate is the leaf of the certificate served now.
func (r *Reloader) Certificate() *x509.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert.Leaf
}

// Reload loads the pair now, changed or not (SIGHUP). On error the old
// certificate stays and the error is logged and returned.
func (r *Reloader) Reload() error {
	st, _ := r.stat()
	return r.try(st)
}

// Watch checks the files every interval until ctx ends and loads the pair
// when either file's modification time or size changed since it was last
// tried.
func (r *Reloader) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := r.stat()
		if err != nil {
			// A file missing for a moment (replaced by rename, a Secret
			// being swapped): the next poll sees the new one.
			continue
		}
		r.mu.Lock()
		same := st == r.stamp
		r.mu.Unlock()
		if !same {
			_ = r.try(st)
		}
	}
}

// try loads the pair, remembering st as tried either way, so that a broken
// pair is logged once, not at every poll.
func (r *Reloader) try(st stamp) error {
	cert, err := load(r.certFile, r.keyFile)
	r.mu.Lock()
	r.stamp = st
	if err == nil {
		r.cert = cert
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Error("tls certificate not reloaded; serving the previous one", "cert", r.certFile, "err", err)
		return err
	}
	r.log.Info("tls certificate loaded", "cert", r.certFile,
		"serial", cert.Leaf.SerialNumber.Text(16), "not_after", cert.Leaf.NotAfter.UTC())
	return nil
}

func (r *Reloader) stat() (stamp, error) {
	c, cerr := os.Stat(r.certFile)
	k, kerr := os.Stat(r.keyFile)
	if err := errors.Join(cerr, kerr); err != nil {
		return stamp{}, err
	}
	return stamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

// load reads and checks the pair; Leaf is always set.
func load(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certreload: %w", err)
	}
	if cert.Leaf == nil { // set by Go 1.23 and later; parse for older
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certreload: %w", err)
		}
	}
	return &cert, nil
}

package storagetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the files of a throwaway certificate authority and of one
// certificate it signed for 127.0.0.1, ::1 and localhost, valid for server
// and client authentication (a Redis node presents the same certificate on
// both sides of the cluster bus). The names are what deploy/cluster.sh reads
// from MAYFLY_CLUSTER_TLS_DIR.
type Certs struct {
	Dir  string // holds the three files
	CA   string // ca.crt: the CA certificate, PEM
	Cert string // redis.crt: the leaf certificate, PEM
	Key  string // redis.key: its private key, PEM, mode 0600
}

// NewCerts writes a fresh CA and certificate into a temp dir of the test.
// Every call makes a new CA, so two calls give certificates that do not
// trust each other.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	c, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteCerts makes a new CA and a certificate signed by it, valid for a day,
// and writes them into dir. Keys are never committed: tests make their own.
func WriteCerts(dir string) (Certs, error) {
	c := Certs{Dir: dir, CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "redis.crt"), Key: filepath.Join(dir, "redis.key")}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mayfly test CA " + now.Format(time.RFC3339Nano)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	// A random serial, as a real CA's: a test that swaps certificates
	// tells them apart by it.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return c, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
		mode       os.FileMode
	}{
		{c.CA, "CERTIFICATE", caDER, 0o644},
		{c.Cert, "CERTIFICATE", leafDER, 0o644},
		{c.Key, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), f.mode); err != nil {
			return c, fmt.Errorf("storagetest: write %s: %w", f.path, err)
		}
	}
	return c, nil
}

package storagetest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// The test Redis may require a password and TLS, like a managed Redis
// (`MAYFLY_TEST_TLS=1 make test` starts such a cluster). These variables say
// how to reach it; every helper client uses them, and Env hands them to a
// Mayfly node under test.
const (
	EnvUsername = "MAYFLY_TEST_REDIS_USERNAME"
	EnvPassword = "MAYFLY_TEST_REDIS_PASSWORD"
	// EnvTLSCA names a PEM CA bundle; when set, the test Redis is reached
	// over TLS and its certificates are verified against it.
	EnvTLSCA = "MAYFLY_TEST_REDIS_TLS_CA_FILE"
)

// Security is how a client authenticates to the test Redis: the ACL user
// and password (empty: none) and the TLS configuration (nil: plaintext).
type Security struct {
	Username, Password string
	CAFile             string
	TLS                *tls.Config
}

func securityFromEnv() (Security, error) {
	s := Security{Username: os.Getenv(EnvUsername), Password: os.Getenv(EnvPassword), CAFile: strings.TrimSpace(os.Getenv(EnvTLSCA))}
	if s.CAFile == "" {
		return s, nil
	}
	cfg, err := TLSConfig(s.CAFile)
	if err != nil {
		return s, fmt.Errorf("storagetest: %s: %w", EnvTLSCA, err)
	}
	s.TLS = cfg
	return s, nil
}

// TLSConfig trusts only the CAs in the PEM file caFile.
func TLSConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Env returns the MAYFLY_* settings with which a Mayfly node reaches the
// test Redis: MAYFLY_REDIS_ADDRS and, when the test Redis needs them, the
// credentials and TLS settings. Tests add their own settings to the map.
func Env(t testing.TB) map[string]string {
	t.Helper()
	env := map[string]string{"MAYFLY_REDIS_ADDRS": strings.Join(Addrs(t), ",")}
	s, err := securityFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.Username != "" {
		env["MAYFLY_REDIS_USERNAME"] = s.Username
	}
	if s.Password != "" {
		env["MAYFLY_REDIS_PASSWORD"] = s.Password
	}
	if s.TLS != nil {
		env["MAYFLY_REDIS_TLS"] = "true"
		env["MAYFLY_REDIS_TLS_CA_FILE"] = s.CAFile
	}
	return env
}

// Secure returns opt with the test Redis's credentials and TLS settings, for
// a test that builds a client of its own to a node of the test Redis.
func Secure(t testing.TB, opt rueidis.ClientOption) rueidis.ClientOption {
	t.Helper()
	s, err := securityFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	opt.Username, opt.Password, opt.TLSConfig = s.Username, s.Password, s.TLS
	return opt
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/redis/rueidis"
)

// redisSecurity is how Mayfly authenticates to Redis and protects the link:
// managed Redis services (and any production cluster) require a password,
// often an ACL user, and TLS. Every file is read and checked when the
// configuration loads, so a bad CA bundle or an unreadable secret stops the
// node at once with the setting's name, never at the first request.
type redisSecurity struct {
	username string
	password secret
	tls      *tls.Config // nil: plaintext
	// What the startup log says about TLS; the config itself is not loggable.
	caFile, serverName string
	clientCert         bool
}

// apply sets the credentials and TLS on opt. rueidis uses one ClientOption
// for every connection it opens: the seeds, the primaries and replicas that
// CLUSTER SLOTS names, the target of a MOVED/ASK, the per-node clients of
// Nodes() (which /readyz and the topology refresh use) and pub/sub. So every
// Redis link of the process is authenticated and, with TLS, verified.
func (r redisSecurity) apply(opt *rueidis.ClientOption) {
	opt.Username = r.username
	opt.Password = r.password.reveal()
	opt.TLSConfig = r.tls
}

// logAttrs describes the settings for the startup log line: whether a
// password is set, never what it is.
func (r redisSecurity) logAttrs() []any {
	return []any{"username", r.username, "password_set", r.password.reveal() != "",
		"tls", r.tls != nil, "tls_ca_file", r.caFile, "tls_server_name", r.serverName, "tls_client_cert", r.clientCert}
}

// redisSecurity reads the MAYFLY_REDIS_USERNAME/PASSWORD*/TLS* settings.
func (p *parser) redisSecurity() redisSecurity {
	r := redisSecurity{username: p.str("MAYFLY_REDIS_USERNAME")}
	// The password is taken as it is: spaces may belong to it.
	pw, pwFile := p.getenv("MAYFLY_REDIS_PASSWORD"), p.str("MAYFLY_REDIS_PASSWORD_FILE")
	switch {
	case pw != "" && pwFile != "":
		p.fail("MAYFLY_REDIS_PASSWORD_FILE", "set either MAYFLY_REDIS_PASSWORD or MAYFLY_REDIS_PASSWORD_FILE, not both")
	case pwFile != "":
		raw, err := os.ReadFile(pwFile)
		if err != nil {
			p.fail("MAYFLY_REDIS_PASSWORD_FILE", err.Error()) // names the path, never the content
			break
		}
		// Editors and `echo` end the file with a newline that is not part
		// of the password.
		pw = strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
		if pw == "" {
			p.fail("MAYFLY_REDIS_PASSWORD_FILE", pwFile+" is empty")
		}
	}
	r.password = newSecret(pw)
	if r.username != "" && pw == "" {
		p.fail("MAYFLY_REDIS_USERNAME", "needs MAYFLY_REDIS_PASSWORD or MAYFLY_REDIS_PASSWORD_FILE")
	}

	r.caFile = p.str("MAYFLY_REDIS_TLS_CA_FILE")
	r.serverName = p.str("MAYFLY_REDIS_TLS_SERVER_NAME")
	certFile, keyFile := p.str("MAYFLY_REDIS_TLS_CERT_FILE"), p.str("MAYFLY_REDIS_TLS_KEY_FILE")
	if !p.boolean("MAYFLY_REDIS_TLS") {
		for _, name := range []string{"MAYFLY_REDIS_TLS_CA_FILE", "MAYFLY_REDIS_TLS_SERVER_NAME", "MAYFLY_REDIS_TLS_CERT_FILE", "MAYFLY_REDIS_TLS_KEY_FILE"} {
			if p.str(name) != "" {
				p.fail(name, "needs MAYFLY_REDIS_TLS=true")
			}
		}
		return r
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.serverName}
	if r.caFile != "" {
		pem, err := os.ReadFile(r.caFile)
		if err != nil {
			p.fail("MAYFLY_REDIS_TLS_CA_FILE", err.Error())
			return r
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			p.fail("MAYFLY_REDIS_TLS_CA_FILE", r.caFile+" holds no PEM certificate")
			return r
		}
	}
	if (certFile == "") != (keyFile == "") {
		p.fail("MAYFLY_REDIS_TLS_CERT_FILE", "MAYFLY_REDIS_TLS_CERT_FILE and MAYFLY_REDIS_TLS_KEY_FILE must be set together")
		return r
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			p.fail("MAYFLY_REDIS_TLS_CERT_FILE", err.Error())
			return r
		}
		cfg.Certificates = []tls.Certificate{cert}
		r.clientCert = true
	}
	r.tls = cfg
	return r
}

// permanentRedisError explains a connection failure that no retry will cure:
// Redis refused the credentials, or TLS could not be established or
// verified. The node then stops with this message instead of waiting for a
// Redis that will never accept it. nil for any other error.
func permanentRedisError(err error) error {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		msg := re.Error()
		for _, prefix := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
			if strings.HasPrefix(msg, prefix) {
				return fmt.Errorf("redis refused to authenticate (check MAYFLY_REDIS_USERNAME and MAYFLY_REDIS_PASSWORD or MAYFLY_REDIS_PASSWORD_FILE): %w", err)
			}
		}
		return nil
	}
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		header    tls.RecordHeaderError
		alert     tls.AlertError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &host), errors.As(err, &invalid):
		return fmt.Errorf("redis TLS: the server's certificate is not trusted (check MAYFLY_REDIS_TLS_CA_FILE and MAYFLY_REDIS_TLS_SERVER_NAME): %w", err)
	case errors.As(err, &header):
		return fmt.Errorf("redis TLS: the server does not speak TLS on this port (check MAYFLY_REDIS_ADDRS and MAYFLY_REDIS_TLS): %w", err)
	case errors.As(err, &alert):
		return fmt.Errorf("redis TLS: the server refused the handshake (a client certificate may be required: MAYFLY_REDIS_TLS_CERT_FILE): %w", err)
	}
	return nil
}

// redisRetryHint names a likely misconfiguration behind a connection error
// that is retried because it may also be transient: a TLS-only Redis resets
// a plaintext connection, which looks like a Redis restarting.
func redisRetryHint(r redisSecurity, err error) string {
	if r.tls == nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) {
		return "if this Redis requires TLS, set MAYFLY_REDIS_TLS=true"
	}
	return ""
}

// secret holds a credential so that no formatting of a config, by fmt
// (%v, %+v, %#v, even of a struct that contains it) or by slog, shows it:
// the value sits behind a pointer, which fmt prints as an address when the
// secret is a field, and the secret's own methods print a placeholder.
type secret struct{ v *string }

func newSecret(s string) secret { return secret{v: &s} }

// reveal returns the credential, for the one place that sends it.
func (s secret) reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

const redacted = "[redacted]"

func (s secret) String() string               { return redacted }
func (s secret) GoString() string             { return redacted }
func (s secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

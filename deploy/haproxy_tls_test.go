package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// curl runs the curl binary with args (-sS -i: the status line and
// headers, then the body) and returns what it printed.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool(t, "curl"), append([]string{"-sS", "-i", "--max-time", "10"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// status is the status code of curl's answer; header one of its headers
// ("" if absent).
func status(answer string) string {
	f := strings.Fields(answer)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

func header(answer, name string) string {
	head, _, _ := strings.Cut(answer, "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n")[1:] {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tlsPEM writes the certificate and its key into one file, as haproxy's
// crt wants them.
func tlsPEM(t *testing.T, c storagetest.Certs) string {
	t.Helper()
	var all []byte
	for _, f := range []string{c.Cert, c.Key} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	p := filepath.Join(c.Dir, "haproxy.pem")
	if err := os.WriteFile(p, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// haproxy terminates HTTPS in front of a real edge whose cookies are
// Secure (the default): curl's cookie jar keeps them from an HTTPS answer
// and sends them back, so a mailbox created over HTTPS is selected and read
// with its cookie. HTTPS answers carry HSTS; the plain listener answers
// 308 to the https URL. Before, haproxy.cfg had no HTTPS at all, and no
// client could send a Secure cookie back through it.
func TestHAProxyHTTPS(t *testing.T) {
	certs := storagetest.NewCerts(t)
	env := storagetest.Env(t)
	env["MAYFLY_REDIS_PREFIX"] = storagetest.Prefix(t)
	// SMTP through haproxy (PROXY v2) with STARTTLS required, on the
	// same CA's certificate.
	env["MAYFLY_SMTP_TLS_CERT"], env["MAYFLY_SMTP_TLS_KEY"] = certs.Cert, certs.Key
	env["MAYFLY_SMTP_REQUIRE_TLS"] = "true"
	env["MAYFLY_SMTP_PROXY_PROTOCOL_FROM"] = "127.0.0.1/32"
	n := startNodeEnv(t, env)
	plain, https, smtp := loopbackPort(t), loopbackPort(t), loopbackPort(t)
	_, adminPort, _ := net.SplitHostPort(n.admin)
	runHAProxy(t, map[string]string{"MAYFLY_LB_HTTP": plain, "MAYFLY_LB_SMTP": smtp,
		"MAYFLY_LB_HTTPS_ADDR": https, "MAYFLY_LB_TLS_CERT": tlsPEM(t, certs)}, n.http, n.smtp, adminPort, https)

	jar := filepath.Join(t.TempDir(), "cookies")
	api := "https://" + https + "/v1"
	tls := []string{"--cacert", certs.CA, "-c", jar, "-b", jar}
	var created string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		// Until haproxy's first check finds the edge up.
		created = curl(t, append(tls, "-X", "POST", "-H", "Content-Type: application/json", "--data", "{}", api+"/mailboxes")...)
		if status(created) == "201" || time.Now().After(deadline) {
			break
		}
	}
	if got := status(created); got != "201" {
		t.Fatalf("POST /v1/mailboxes over HTTPS: %s, want 201:\n%s", got, created)
	}
	t.Logf("POST %s/mailboxes:\n%s", api, created)
	if got, want := header(created, "Strict-Transport-Security"), "max-age=31536000"; got != want {
		t.Errorf("Strict-Transport-Security = %q, want %q", got, want)
	}
	if got := header(created, "Set-Cookie"); !strings.Contains(strings.ToLower(got), "secure") {
		t.Errorf("Set-Cookie = %q, want a Secure cookie", got)
	}
	id := regexp.MustCompile(`"id":"([0-9a-f-]{36})"`).FindStringSubmatch(created)
	if id == nil {
		t.Fatalf("no mailbox id in %s", created)
	}
	kept, err := os.ReadFile(jar)
	if err != nil {
		t.Fatal(err)
	}
	// Netscape cookie file: domain, subdomains, path, secure, expiry, name, value.
	if !regexp.MustCompile(`(?m)^\S+\t\S+\t/\S*\tTRUE\t\d+\tmayfly_`).Match(kept) {
		t.Errorf("curl's jar holds no Secure mayfly_ cookie:\n%s", kept)
	}

	// The cookie goes back over HTTPS: select, then read the mailbox.
	if got := status(curl(t, append(tls, "-X", "POST", api+"/mailboxes/"+id[1]+"/select")...)); got != "200" {
		t.Errorf("POST select with the jar's cookie: %s, want 200", got)
	}
	current := curl(t, append(tls, api+"/mailboxes/current")...)
	if got := status(current); got != "200" || !strings.Contains(current, id[1]) {
		t.Errorf("GET /v1/mailboxes/current with the jar's cookies: %s, want 200 naming %s:\n%s", got, id[1], current)
	}
	if got := status(curl(t, "--cacert", certs.CA, api+"/mailboxes/current")); got == "200" {
		t.Errorf("GET /v1/mailboxes/current without cookies: %s, want a refusal (the 200 above came from the cookie)", got)
	}

	// Mail to it through haproxy's SMTP frontend: refused before STARTTLS
	// (MAYFLY_SMTP_REQUIRE_TLS), stored after it, and listed over HTTPS.
	addr := regexp.MustCompile(`"address":"([^"]+)"`).FindStringSubmatch(created)
	if addr == nil {
		t.Fatalf("no address in %s", created)
	}
	if err := sendThrough(t, smtp, addr[1], nil); !isCode(err, 530) {
		t.Errorf("MAIL through haproxy without STARTTLS: %v, want 530", err)
	}
	if err := sendThrough(t, smtp, addr[1], caPool(t, certs.CA)); err != nil {
		t.Fatalf("mail over STARTTLS through haproxy: %v", err)
	}
	if list := curl(t, append(tls, api+"/messages")...); status(list) != "200" || !strings.Contains(list, "over STARTTLS") {
		t.Errorf("GET /v1/messages over HTTPS after the mail: %s, want it listed:\n%s", status(list), list)
	}

	// Plain HTTP: 308 to the same URL over https, no HSTS (RFC 6797 7.2:
	// a plain answer must not carry it). The Host header is kept, but for
	// a :80 it names.
	redirect := curl(t, "http://"+plain+"/v1/mailboxes/current?x=1")
	t.Logf("GET http://%s/v1/mailboxes/current?x=1:\n%s", plain, redirect)
	if got := status(redirect); got != "308" {
		t.Errorf("plain HTTP: %s, want 308:\n%s", got, redirect)
	}
	if got, want := header(redirect, "Location"), "https://"+plain+"/v1/mailboxes/current?x=1"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if got := header(redirect, "Strict-Transport-Security"); got != "" {
		t.Errorf("plain answer carries Strict-Transport-Security %q", got)
	}
	if got, want := header(curl(t, "-H", "Host: mayfly.example:80", "http://"+plain+"/v1/domains"), "Location"), "https://mayfly.example/v1/domains"; got != want {
		t.Errorf("Location for Host mayfly.example:80 = %q, want %q", got, want)
	}
}

// X-Forwarded-Proto tells the edge what the client used, whatever the
// client sent; without MAYFLY_LB_HTTPS_ADDR the plain listener serves as
// before (no redirect).
func TestHAProxyForwardedProto(t *testing.T) {
	certs := storagetest.NewCerts(t)
	h := newHolder(t) // only for its admin listener: /readyz 200
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Proto", strings.Join(r.Header.Values("X-Forwarded-Proto"), ","))
	}))
	_, adminPort, _ := net.SplitHostPort(h.admin)
	spoof := []string{"-H", "X-Forwarded-Proto: gopher"}

	plain, https := loopbackPort(t), loopbackPort(t)
	runHAProxy(t, map[string]string{"MAYFLY_LB_HTTP": plain, "MAYFLY_LB_SMTP": loopbackPort(t),
		"MAYFLY_LB_HTTPS_ADDR": https, "MAYFLY_LB_TLS_CERT": tlsPEM(t, certs)}, ln.Addr().String(), h.addr, adminPort, https)
	if got := header(curl(t, append(spoof, "--cacert", certs.CA, "https://"+https+"/v1/domains")...), "X-Seen-Proto"); got != "https" {
		t.Errorf("over HTTPS the edge saw X-Forwarded-Proto %q, want https", got)
	}

	only := loopbackPort(t)
	runHAProxy(t, map[string]string{"MAYFLY_LB_HTTP": only, "MAYFLY_LB_SMTP": loopbackPort(t)}, ln.Addr().String(), h.addr, adminPort, only)
	answer := curl(t, append(spoof, "http://"+only+"/v1/domains")...)
	if got := status(answer); got != "200" {
		t.Errorf("plain HTTP without MAYFLY_LB_HTTPS_ADDR: %s, want 200 (no redirect):\n%s", got, answer)
	}
	if got := header(answer, "X-Seen-Proto"); got != "http" {
		t.Errorf("over plain HTTP the edge saw X-Forwarded-Proto %q, want http", got)
	}
}

// sendThrough sends one message to rcpt through the SMTP listener at addr
// (haproxy's), over STARTTLS verified against roots when roots is set.
func sendThrough(t *testing.T, addr, rcpt string, roots *x509.CertPool) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if roots != nil {
		if err := c.StartTLS(&tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}); err != nil {
			return err
		}
		if state, ok := c.TLSConnectionState(); !ok || state.Version < tls.VersionTLS12 {
			return errors.New("no TLS 1.2 or later after STARTTLS")
		}
	}
	if err := c.Mail("sender@example.org"); err != nil {
		return err
	}
	if err := c.Rcpt(rcpt); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("Subject: over STARTTLS\r\n\r\ncode 123456\r\n")); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func isCode(err error, code int) bool {
	var te *textproto.Error
	return errors.As(err, &te) && te.Code == code
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("no certificate in %s", file)
	}
	return pool
}

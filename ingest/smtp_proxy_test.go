package ingest_test

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/pires/go-proxyproto"
)

// proxyDial connects to addr from the loopback address from (the test's
// "proxy" or "client" host) and, when claim is valid, first writes a PROXY
// header of version (1 or 2) naming claim as the client. It returns the
// first reply line, or "" when the server closed the connection instead.
func proxyDial(t *testing.T, addr, from string, version byte, claim string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if claim != "" {
		src := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(claim))
		h := proxyproto.HeaderProxyFromAddrs(version, src, c.RemoteAddr())
		if _, err := h.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	lines, err := readReply(r)
	if err != nil {
		if isClosed(err) {
			return c, r, ""
		}
		t.Fatalf("greeting: %v", err)
	}
	return c, r, lines[len(lines)-1]
}

// Behind a TCP load balancer the per-IP limits apply to the client the
// PROXY header names (v1 and v2); a PROXY header from any other peer moves
// nothing.
func TestSMTPProxyProtocol(t *testing.T) {
	t.Parallel()
	const proxy, other = "127.0.0.2", "127.0.0.3"
	h := newSMTPHarness(t, ingest.Config{
		ConnRule:          ratelimit.Rule{Limit: 2},
		ProxyProtocolFrom: []netip.Prefix{netip.MustParsePrefix(proxy + "/32")},
	})
	roomInWindow(t, 0, 10*time.Second) // every count below is in one window of ConnRule

	// Client A, through the proxy: two connections, then the limit.
	for i, v := range []byte{1, 2} {
		if _, _, got := proxyDial(t, h.addr, proxy, v, "192.0.2.10:4000"); !strings.HasPrefix(got, "220") {
			t.Fatalf("A's connection %d (PROXY v%d) = %q, want 220", i+1, v, got)
		}
	}
	if _, _, got := proxyDial(t, h.addr, proxy, 2, "192.0.2.10:4001"); !strings.HasPrefix(got, "421 4.7.0") {
		t.Fatalf("A's third connection = %q, want 421 4.7.0", got)
	}
	// Client B, through the same proxy, is another client.
	if _, _, got := proxyDial(t, h.addr, proxy, 1, "[2001:db8::1]:4000"); !strings.HasPrefix(got, "220") {
		t.Fatalf("B's connection = %q, want 220: the limit must follow the real client", got)
	}

	// A peer that is not a trusted proxy: its "PROXY" line is no header. It
	// is greeted as itself, the line is refused as a command, and the limit
	// it moves is its own, not the forged client's.
	for range 2 {
		c, r, got := proxyDial(t, h.addr, other, 1, "192.0.2.20:4000")
		if !strings.HasPrefix(got, "220") {
			t.Fatalf("untrusted peer greeted %q, want 220", got)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		lines, err := readReply(r)
		if err != nil || !strings.HasPrefix(lines[len(lines)-1], "5") {
			t.Fatalf("forged PROXY line answered %q, %v; want a 5xx refusal", lines, err)
		}
	}
	if _, _, got := proxyDial(t, h.addr, other, 0, ""); !strings.HasPrefix(got, "421 4.7.0") {
		t.Fatalf("untrusted peer's third connection = %q, want 421 4.7.0 (counted as itself)", got)
	}
	for range 2 {
		if _, _, got := proxyDial(t, h.addr, proxy, 2, "192.0.2.20:4000"); !strings.HasPrefix(got, "220") {
			t.Fatalf("the forged client through the real proxy = %q, want 220: the forgery must not count", got)
		}
	}

	// The trusted proxy must send a header: without one, or with a LOCAL
	// one (a health check), the connection is closed without a greeting.
	c, _, got := proxyDial(t, h.addr, proxy, 0, "")
	if got != "" {
		t.Fatalf("trusted peer without a header got %q, want the connection closed", got)
	}
	c.Close()
	lc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxy)}}).Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	local := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}
	if _, err := local.WriteTo(lc); err != nil {
		t.Fatal(err)
	}
	_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(lc).ReadString('\n'); !isClosed(err) {
		t.Fatalf("LOCAL header: read %q, %v; want the connection closed", line, err)
	}
	if got := h.metric(t, "mayfly_smtp_rejections_total", "reason", "proxy_header"); got != 2 {
		t.Errorf("proxy_header rejections = %v, want 2", got)
	}
}

package edge_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/internal/localnet"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

// dialFrom opens a keep-alive connection to e from the local address from
// and completes one request on it, so the server holds it open.
func dialFrom(t *testing.T, e *env, from string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := localnet.Dialer(netip.MustParseAddr(from)).Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.base, "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/domains HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response from %s: %v", from, err)
	}
	io.ReadAll(res.Body)
	res.Body.Close()
	return c, res
}

// served dials n connections from the addresses from(0) … from(n-1), keeps
// them open and returns how many were served (200); every other must be
// the connection cap's 503.
func served(t *testing.T, e *env, n int, from func(i int) netip.Addr) int {
	t.Helper()
	ok := 0
	for i := range n {
		switch _, res := dialFrom(t, e, from(i).String()); res.StatusCode {
		case 200:
			ok++
		case 503:
		default:
			t.Fatalf("connection from %s: %d, want 200 or 503", from(i), res.StatusCode)
		}
	}
	return ok
}

// One IPv6 /64 is one client, and one /48 one network, however many
// addresses their connections come from; other networks are still served.
// Counting exact addresses let 17,000 addresses of one /64 take a node
// (issue 26).
func TestConnectionsPerIPv6Network(t *testing.T) {
	t.Parallel()
	block := localnet.Block6(t)
	e := newEnvAt(t, "[::1]:0", func(c *edge.Config, r *ratelimit.Config) {
		c.ConnsPerIP, c.ConnsPerNet, c.MaxConns = 4, 10, 40
		r.RequestsPerSecond = 1000
	})
	if got := served(t, e, 40, func(i int) netip.Addr { return localnet.Addr(block, 1, uint64(i+1)) }); got != 4 {
		t.Fatalf("40 addresses of one /64: %d served, want its 4", got)
	}
	other := 0
	for subnet := uint16(2); subnet <= 4; subnet++ { // other /64s of the /48
		other += served(t, e, 5, func(i int) netip.Addr { return localnet.Addr(block, subnet, uint64(i+1)) })
	}
	if got, want := 4+other, 10; got != want {
		t.Fatalf("one /48: %d served, want its %d", got, want)
	}
	if _, res := dialFrom(t, e, "::1"); res.StatusCode != 200 {
		t.Fatalf("a client of another network: %d, want 200", res.StatusCode)
	}
}

// One IPv4 /24 is one network: its addresses share ConnsPerNet.
func TestConnectionsPerIPv4Network(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, r *ratelimit.Config) {
		c.ConnsPerIP, c.ConnsPerNet = 2, 5
		r.RequestsPerSecond = 1000
	})
	got := served(t, e, 8, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 26, byte(1 + i/2)}) })
	if got != 5 {
		t.Fatalf("8 connections from 4 addresses of one /24: %d served, want 5", got)
	}
	if _, res := dialFrom(t, e, "127.0.27.1"); res.StatusCode != 200 {
		t.Fatalf("a client of another /24: %d, want 200", res.StatusCode)
	}
}

// One client IP cannot hold more than its share of the node's connections;
// the refusal is the API's envelope; other clients, and trusted proxies, are
// not affected; a closed connection frees its place.
func TestConnectionsPerIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, r *ratelimit.Config) { c.ConnsPerIP = 3; r.RequestsPerSecond = 1000 })
	var held []net.Conn
	for range 3 {
		c, res := dialFrom(t, e, "127.0.0.5")
		if res.StatusCode != 200 {
			t.Fatalf("connection within the cap: %d", res.StatusCode)
		}
		held = append(held, c)
	}
	_, res := dialFrom(t, e, "127.0.0.5")
	if res.StatusCode != 503 || res.Header.Get("X-Request-ID") == "" || !res.Close {
		t.Fatalf("4th connection from one IP: %d %v, want 503 with a request id and Connection: close", res.StatusCode, res.Header)
	}
	if _, res := dialFrom(t, e, "127.0.0.6"); res.StatusCode != 200 {
		t.Fatalf("another client: %d, want 200", res.StatusCode)
	}
	for range 4 { // 127.0.0.1 is a trusted proxy here: exempt
		if _, res := dialFrom(t, e, "127.0.0.1"); res.StatusCode != 200 {
			t.Fatalf("trusted proxy: %d, want 200", res.StatusCode)
		}
	}
	held[0].Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, res := dialFrom(t, e, "127.0.0.5"); res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection did not free its place")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The node-wide cap holds for every peer, trusted or not.
func TestConnectionsPerNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, r *ratelimit.Config) { c.MaxConns = 4; r.RequestsPerSecond = 1000 })
	for i := range 4 {
		if _, res := dialFrom(t, e, "127.0.0.1"); res.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i+1, res.StatusCode)
		}
	}
	if _, res := dialFrom(t, e, "127.0.0.1"); res.StatusCode != 503 {
		t.Fatalf("5th connection: %d, want 503", res.StatusCode)
	}
}

// A client over its share of connections that is refused (429) loses that
// connection: refusals drain connections instead of keeping them open.
func TestRefusedOverShareCloses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, r *ratelimit.Config) { c.ConnsPerIP = 8; r.RequestsPerSecond = 1 })
	dialFrom(t, e, "127.0.0.7") // within its share: uses the one request
	c, res := dialFrom(t, e, "127.0.0.7")
	if res.StatusCode != 429 || !res.Close {
		t.Fatalf("429 over the share: %d close=%v, want 429 and close", res.StatusCode, res.Close)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("connection still open after the refusal")
	}
}

// emfileListener fails its first accepts as a process out of descriptors
// does (accept4: too many open files).
type emfileListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Running out of file descriptors is a pause, not the end of the node.
func TestAcceptErrorsAreRetried(t *testing.T) {
	t.Parallel()
	client := storagetest.Client(t)
	prefix := storagetest.Prefix(t)
	srv := edge.New(storage.New(client, storage.Config{KeyPrefix: prefix}), ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix}),
		edge.Config{Domains: []string{"mayfly.test"}}, slog.New(slog.DiscardHandler), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	el := &emfileListener{Listener: ln}
	el.fails.Store(5)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(el) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ln.Addr().String() + "/v1/domains")
	if err != nil {
		t.Fatalf("after EMFILE accept errors: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /domains = %d", res.StatusCode)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v on an accept error", err)
	default:
	}
}

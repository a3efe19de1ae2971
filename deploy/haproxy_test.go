package deploy

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/internal/localnet"
)

// holder accepts connections and holds them, counting them: a node behind
// haproxy that never answers. Its admin listener answers /readyz 200.
type holder struct {
	addr, admin string
	accepted    atomic.Int64
}

func newHolder(t *testing.T) *holder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{addr: ln.Addr().String(), admin: adm.Addr().String()}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		adm.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			h.accepted.Add(1)
			go io.Copy(io.Discard, c)
		}
	}()
	go http.Serve(adm, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return h
}

// startHAProxy runs haproxy.cfg with both frontends on [::1] and every
// server line pointing at the holder; it returns the frontends' addresses
// once haproxy listens and its first health check reached the holder.
func startHAProxy(t *testing.T, h *holder) (api, smtp string) {
	t.Helper()
	api, smtp = loopbackPort(t), loopbackPort(t)
	_, adminPort, _ := net.SplitHostPort(h.admin)
	runHAProxy(t, map[string]string{"MAYFLY_LB_HTTP": api, "MAYFLY_LB_SMTP": smtp}, h.addr, h.addr, adminPort, smtp)
	for deadline := time.Now().Add(10 * time.Second); h.accepted.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the probe reached the holder
	}
	return api, smtp
}

// loopbackPort is a free address on [::1].
func loopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runHAProxy runs haproxy.cfg with env (the MAYFLY_LB_* settings) and both
// edges at edges, both ingests at ingests, every health check on
// adminPort; it returns once haproxy listens on ready.
func runHAProxy(t *testing.T, env map[string]string, edges, ingests, adminPort, ready string) {
	t.Helper()
	cmd := exec.Command(tool(t, "haproxy"), "-db", "-f", "haproxy/haproxy.cfg")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for _, s := range []string{"EDGE1_HTTP", "EDGE2_HTTP"} {
		cmd.Env = append(cmd.Env, "MAYFLY_"+s+"="+edges)
	}
	for _, s := range []string{"INGEST1_SMTP", "INGEST2_SMTP"} {
		cmd.Env = append(cmd.Env, "MAYFLY_"+s+"="+ingests)
	}
	for _, s := range []string{"EDGE1_ADMIN", "EDGE2_ADMIN", "INGEST1_ADMIN", "INGEST2_ADMIN"} {
		cmd.Env = append(cmd.Env, "MAYFLY_"+s+"="+adminPort)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("haproxy exited:\n%s", out.String())
		default:
		}
		if c, err := net.Dial("tcp", ready); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("haproxy did not listen within 10 s")
		}
	}
}

// admitted dials n connections to addr from the addresses from(0) …
// from(n-1) and returns how many more the server behind haproxy holds
// once the count settles.
func admitted(t *testing.T, h *holder, addr string, n int, from func(i int) netip.Addr) int64 {
	t.Helper()
	before := h.accepted.Load()
	for i := range n {
		// A refused connection may be reset before Dial returns.
		if c, err := localnet.Dialer(from(i)).Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	last := int64(-1)
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		if got := h.accepted.Load(); got == last {
			return got - before
		} else {
			last = got
		}
	}
	t.Fatal("the held connections did not settle")
	return 0
}

// haproxy's per-source caps count a client the way the nodes' limits do
// (an IPv6 /64, however many of its addresses connect) and cap a network
// (an IPv6 /48) as a whole, in both frontends; another network is still let
// through. Before, the tables (type ip) counted exact addresses, so one /64
// passed whole.
func TestHAProxyCountsClientsAndNetworks(t *testing.T) {
	block := localnet.Block6(t)
	h := newHolder(t)
	api, smtp := startHAProxy(t, h)
	if got := admitted(t, h, smtp, 30, one64With(block, 1)); got != 20 {
		t.Errorf("30 SMTP connections from one /64: %d let through, want MAYFLY_LB_SMTP_CONNS_PER_IP (20)", got)
	}
	spread := func(i int) netip.Addr { return localnet.Addr(block, uint16(2+i/10), uint64(i%10+1)) }
	if got := admitted(t, h, smtp, 100, spread); got != 80 {
		t.Errorf("100 more from 10 other /64s of the /48: %d let through, want the rest of MAYFLY_LB_SMTP_CONNS_PER_NET (100 - 20)", got)
	}
	if got := admitted(t, h, smtp, 1, func(int) netip.Addr { return netip.IPv6Loopback() }); got != 1 {
		t.Errorf("another network: %d let through, want 1", got)
	}

	// The API's frontend refuses at accept a client over 200 and a
	// network over 800 open connections (requests would be refused with
	// 429 past 100 and 400).
	if got := open(t, api, 250, one64With(block, 20)); got != 200 {
		t.Errorf("250 idle API connections from one /64: %d kept, want MAYFLY_LB_HTTP_CONNS_PER_IP_HARD (200)", got)
	}
	if got := open(t, api, 900, func(i int) netip.Addr { return localnet.Addr(block, uint16(30+i/100), uint64(i%100+1)) }); got != 600 {
		t.Errorf("900 more from nine other /64s: %d kept, want the rest of MAYFLY_LB_HTTP_CONNS_PER_NET_HARD (800 - 200)", got)
	}
}

// one64With numbers addresses of the /64 subnet of block.
func one64With(block netip.Prefix, subnet uint16) func(int) netip.Addr {
	return func(i int) netip.Addr { return localnet.Addr(block, subnet, uint64(i+1)) }
}

// open dials n connections to addr from from(0) … from(n-1), sends nothing,
// and returns how many haproxy keeps open (it closes a refused one at once).
func open(t *testing.T, addr string, n int, from func(i int) netip.Addr) int {
	t.Helper()
	var conns []net.Conn
	for i := range n {
		if c, err := localnet.Dialer(from(i)).Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
			conns = append(conns, c)
		}
	}
	// Kept: still open once haproxy has decided on every connection. A
	// loaded machine's haproxy may not have accepted the last ones yet
	// after a fixed wait (they look open: one run counted 201 of a 200
	// cap), so count until two counts 150 ms apart agree, within 4 s in
	// all (haproxy closes idle connections after its 10 s http-request
	// timeout: every one then looks refused).
	count := func() int {
		kept := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					kept++
				}
			}
		}
		return kept
	}
	time.Sleep(500 * time.Millisecond)
	kept := count()
	for range 24 {
		time.Sleep(150 * time.Millisecond)
		if again := count(); again == kept {
			return kept
		} else {
			kept = again
		}
	}
	return kept
}

package edge

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
)

// connGuard is the edge's listener: it bounds the connections one client,
// one network and all peers may hold open (event streams included, which
// fasthttp no longer counts once hijacked), and it survives accept errors.
// Without it one client holding ~20,000 idle keep-alive connections ran the
// process out of file descriptors, and fasthttp's Serve returned on the
// EMFILE, ending the node.
//
// A client is what the rate limits count (ratelimit.ClientPrefix: an IPv4
// address, an IPv6 /64), and its network the block one party holds many
// clients of (ratelimit.NetworkPrefix: IPv4 /24, IPv6 /48). Counting exact
// IPv6 addresses let one /64 take the whole node, one address per connection.
type connGuard struct {
	net.Listener
	log       *slog.Logger
	maxConns  int
	perIP     int            // per client
	perNet    int            // per network
	exempt    []netip.Prefix // trusted proxies: one peer carries many clients
	open      *atomic.Int64  // the server's (mayfly_http_conns_open)
	mu        sync.Mutex
	byIP      map[netip.Prefix]int // by client
	byNet     map[netip.Prefix]int // by network
	refused   func(reason string)
	closeOnce sync.Once
	closed    chan struct{}
}

// refusal is what a connection over a cap gets before it is closed: the
// API's envelope, though no request was read (its request id is made here).
func refusal() []byte {
	id := randomID()
	body := `{"error":{"code":"REQUEST_PROTECTION","message":"Too many open connections; close some and retry after a second."},"request_id":"` + id + `"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
		"X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nRetry-After: 1\r\nX-Request-ID: " + id +
		"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func newConnGuard(ln net.Listener, log *slog.Logger, open *atomic.Int64, maxConns, perIP, perNet int, exempt []netip.Prefix, refused func(string)) *connGuard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &connGuard{Listener: ln, log: log, open: open, maxConns: maxConns, perIP: perIP, perNet: perNet, exempt: exempt,
		byIP: map[netip.Prefix]int{}, byNet: map[netip.Prefix]int{}, refused: refused, closed: make(chan struct{})}
}

// Accept returns the next connection within the caps. Connections over a
// cap are answered and closed here; accept errors other than a closed
// listener (EMFILE, ENFILE, ECONNABORTED…) are retried with a backoff of
// 5 ms doubling to 1 s, as net/http does, instead of ending Serve.
func (g *connGuard) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			select {
			case <-g.closed:
				return nil, net.ErrClosed
			default:
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			g.log.Warn("http accept", "err", err, "retry_in", delay.String())
			time.Sleep(delay)
			continue
		}
		delay = 0
		ip := peerIP(c.RemoteAddr())
		if reason := g.admit(ip); reason != "" {
			g.refused(reason)
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(refusal())
			_ = c.Close()
			continue
		}
		return &guardedConn{Conn: c, g: g, ip: ip}, nil
	}
}

func (g *connGuard) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// admit counts a new connection from ip, or says why it may not open.
// Trusted proxies are counted per address and never refused by the client
// or network caps.
func (g *connGuard) admit(ip netip.Addr) string {
	if n := g.open.Add(1); n > int64(g.maxConns) {
		g.open.Add(-1)
		return "connections"
	}
	client, network := g.keys(ip)
	exempt := g.isExempt(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case exempt:
	case g.byIP[client] >= g.perIP:
		g.open.Add(-1)
		return "connections_per_ip"
	case g.byNet[network] >= g.perNet:
		g.open.Add(-1)
		return "connections_per_net"
	}
	g.byIP[client]++
	g.byNet[network]++
	return ""
}

func (g *connGuard) release(ip netip.Addr) {
	g.open.Add(-1)
	client, network := g.keys(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byIP[client]--; g.byIP[client] <= 0 {
		delete(g.byIP, client)
	}
	if g.byNet[network]--; g.byNet[network] <= 0 {
		delete(g.byNet, network)
	}
}

// keys are the counts a connection from ip is in: its client's and its
// network's, as the rate limits key them. A trusted proxy counts as itself.
func (g *connGuard) keys(ip netip.Addr) (client, network netip.Prefix) {
	if g.isExempt(ip) {
		p := netip.PrefixFrom(ip, ip.BitLen())
		return p, p
	}
	return ratelimit.ClientPrefix(ip), ratelimit.NetworkPrefix(ip)
}

// overShare reports whether ip holds more than its share of connections:
// a refused request (429, 503 REQUEST_PROTECTION) from such a peer also
// closes its connection, so refusals drain connections instead of keeping
// them.
func (g *connGuard) overShare(ip netip.Addr) bool {
	if g == nil || g.isExempt(ip) {
		return false
	}
	client, _ := g.keys(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byIP[client] > max(1, g.perIP/8)
}

func (g *connGuard) isExempt(ip netip.Addr) bool {
	for _, p := range g.exempt {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

type guardedConn struct {
	net.Conn
	g     *connGuard
	ip    netip.Addr
	once  sync.Once
	drain atomic.Int64 // nanoseconds to drain for on Close; 0: close at once
}

// drainBytes bounds what a closing connection reads and discards after a
// 413 (drainOnClose): bodies up to it, sent whole before the client reads,
// still get the answer.
const drainBytes = 64 << 20

// drainOnClose makes Close half-close the connection and read (and discard)
// what the peer still sends, up to drainBytes or d, before it really closes.
// Closing a socket with unread data in its receive buffer sends a reset,
// which destroys the answer we just wrote before the peer reads it: a client
// that writes its whole body before reading (Python's http.client, curl
// without Expect) then sees "connection reset" instead of the 413.
func (c *guardedConn) drainOnClose(d time.Duration) { c.drain.Store(int64(d)) }

// NetConn is the accepted connection (an event stream watches its socket:
// watchPeer).
func (c *guardedConn) NetConn() net.Conn { return c.Conn }

func (c *guardedConn) Close() error {
	if d := time.Duration(c.drain.Swap(0)); d > 0 {
		// In its own goroutine: fasthttp's worker is freed at once, and
		// the connection still counts against the caps until it is closed.
		go c.drainAndClose(d)
		return nil
	}
	c.once.Do(func() { c.g.release(c.ip) })
	return c.Conn.Close()
}

func (c *guardedConn) drainAndClose(d time.Duration) {
	defer c.Close()
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite() // the answer is flushed: FIN after it
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(d))
	_, _ = io.CopyN(io.Discard, c.Conn, drainBytes)
}

func peerIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

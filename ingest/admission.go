package ingest

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
)

// reserve takes a session slot for a new connection from ip, or returns the
// refusal.
func (s *Server) reserve(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return errShuttingDown
	case len(s.conns) >= s.cfg.MaxSessions:
		return errBusy
	case s.perIP[c.ip] >= s.cfg.MaxSessionsPerIP:
		return errIPSessions
	case s.perNet[c.network] >= s.cfg.MaxSessionsPerNet:
		return errNetSessions
	}
	s.conns[c] = struct{}{}
	s.perIP[c.ip]++
	s.perNet[c.network]++
	s.metrics.sessions.Inc()
	return nil
}

// release frees c's session slot.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	if s.perNet[c.network]--; s.perNet[c.network] <= 0 {
		delete(s.perNet, c.network)
	}
	s.metrics.sessions.Dec()
}

// admit decides whether a new connection may start a session and hands it
// to go-smtp through l, or answers 421 and closes it. It runs in its own
// goroutine, so a slow Redis never stalls the accept loop.
func (s *Server) admit(nc net.Conn, l *listener) {
	if !s.proxyHeaderOK(nc) {
		nc.Close()
		return
	}
	now := time.Now()
	peer := peerAddr(nc.RemoteAddr())
	c := &conn{Conn: nc, srv: s, ip: clientKey(nc.RemoteAddr()), network: ratelimit.NetworkPrefix(peer),
		relay: s.isRelay(peer), end: now.Add(s.cfg.SessionTimeout), progress: now}
	if err := s.reserve(c); err != nil {
		s.refuseConn(c, err)
		return
	}
	// The connection and its first transaction are counted together, in one
	// round trip: the first MAIL then needs no Redis call of its own. A
	// connection that never sends MAIL has used one transaction of the
	// allowance anyway.
	connErr, mailErr := s.allowConn(c)
	if connErr != nil {
		s.release(c)
		s.refuseConn(c, connErr)
		return
	}
	c.firstMail = mailErr
	c.counted = true
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// refuseConn answers a connection that gets no session and closes it.
func (s *Server) refuseConn(c *conn, err error) {
	s.metrics.rejections.WithLabelValues(reason(err)).Inc()
	s.logClient(slog.LevelDebug, "smtp connection refused", c.ip, slog.String("reason", reason(err)))
	_ = c.Conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_ = writeReply(c.Conn, err)
	c.closeRefused()
}

// maxLease is the most transactions a connection leases at once. A lease
// doubles from 2 up to it, so a connection that sends one more message
// leases few, and one that sends a hundred asks Redis 9 times instead of 99.
const maxLease = 16

// mailLease is a connection's share of its transaction window.
type mailLease struct {
	left   int       // transactions admitted and not used yet
	size   int       // the last lease's size asked for
	window int64     // the window they were counted in (ratelimit.Lease)
	end    time.Time // when they become void
}

// takeMail admits a transaction of c after its first, from c's lease or a
// new one (ratelimit.Limiter.Take), and returns the refusal (or nil); a
// Redis failure is handled as limitUnavailable says. The window never
// admits more than its limit; an unused lease makes the client's other
// connections refused sooner until the lease is handed back (giveMail) or
// its window ends.
func (s *Server) takeMail(c *conn) error {
	now := time.Now()
	if c.lease.left > 0 && now.Before(c.lease.end) {
		c.lease.left--
		return nil
	}
	c.lease.left = 0
	_, rule := s.rules(c)
	c.lease.size = min(max(2*c.lease.size, 2), maxLease)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	lease, err := s.limiter.Take(ctx, rule, c.ip, c.lease.size)
	if err != nil {
		return s.limitUnavailable(rule.Name, c.ip, err)
	}
	if lease.Granted == 0 {
		return errMailRate
	}
	c.lease = mailLease{left: lease.Granted - 1, size: c.lease.size, window: lease.Window, end: lease.End}
	return nil
}

// giveMail hands back the unused transactions of c's lease, while their
// window lasts. A failure leaves them counted: the client's other
// connections may be refused sooner until the window ends, never later.
func (s *Server) giveMail(c *conn) {
	left := c.lease.left
	c.lease.left = 0
	if left == 0 || !time.Now().Before(c.lease.end) {
		return
	}
	_, rule := s.rules(c)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	if err := s.limiter.Give(ctx, rule, c.ip, c.lease.window, left); err != nil {
		s.metrics.redisErrors.Inc()
		s.logClient(slog.LevelDebug, "smtp lease not handed back", c.ip, slog.Any("err", err))
	}
}

// allowConn counts a new connection c and its first transaction, and
// returns the refusal (or nil) of each; a Redis failure is handled as
// limitUnavailable says.
func (s *Server) allowConn(c *conn) (conn, mail error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	connRule, mailRule := s.rules(c)
	ds, err := s.limiter.AllowAll(ctx, c.ip, connRule, mailRule)
	if err != nil {
		err = s.limitUnavailable("conn+mail", c.ip, err)
		return err, err
	}
	if !ds[0].Allowed {
		conn = errConnRate
	}
	if !ds[1].Allowed {
		mail = errMailRate
	}
	return conn, mail
}

// rules are the per-client rules c is counted against: the relay rules for
// a client in Config.Relays, else ConnRule and MailRule.
func (s *Server) rules(c *conn) (conn, mail ratelimit.Rule) {
	if c.relay {
		return s.cfg.RelayConnRule, s.cfg.RelayMailRule
	}
	return s.cfg.ConnRule, s.cfg.MailRule
}

// isRelay reports whether the client at ip is in Config.Relays.
func (s *Server) isRelay(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range s.cfg.Relays {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// limitUnavailable counts a limiter failure and returns what the hit gets:
// nil (admitted) unless Config.LimitsFailClosed. The limits protect Redis
// and the node, and with Redis down the recipient check already answers
// 451, so failing closed would mostly hide the real cause (the default);
// failing closed answers 451 4.3.0 at once instead.
func (s *Server) limitUnavailable(rule, client string, err error) error {
	s.metrics.redisErrors.Inc()
	if s.cfg.LimitsFailClosed {
		s.logClient(slog.LevelWarn, "smtp rate limit unavailable; refusing", client, slog.String("rule", rule), slog.Any("err", err))
		return err
	}
	s.logClient(slog.LevelWarn, "smtp rate limit unavailable; admitting", client, slog.String("rule", rule), slog.Any("err", err))
	return nil
}

// acquireBuffer reserves n more message bytes of the node's buffer budget
// for client, or returns the refusal: errOverloaded when the node's budget
// is spent, errIPBuffer when client's share of it is.
func (s *Server) acquireBuffer(client string, n int64) error {
	s.bufMu.Lock()
	defer s.bufMu.Unlock()
	switch {
	case s.buffered+n > s.cfg.MaxBufferBytes:
		return errOverloaded
	case s.bufByIP[client]+n > s.cfg.MaxBufferBytesPerIP:
		return errIPBuffer
	}
	s.addBuffer(client, n)
	return nil
}

// addBuffer counts n message bytes (negative: freed) of client, without a
// check; the caller holds bufMu.
func (s *Server) addBuffer(client string, n int64) {
	s.buffered += n
	if s.bufByIP[client] += n; s.bufByIP[client] <= 0 {
		delete(s.bufByIP, client)
	}
	s.metrics.buffered.Add(float64(n))
}

// forceBuffer counts n bytes of client beyond the caps: the one moment a
// finished transfer is held twice, as its chunks and as the one copy the
// parser reads.
func (s *Server) forceBuffer(client string, n int64) {
	s.bufMu.Lock()
	defer s.bufMu.Unlock()
	s.addBuffer(client, n)
}

func (s *Server) releaseBuffer(client string, n int64) { s.forceBuffer(client, -n) }

// peerAddr is a's IP address; the zero Addr when it has none.
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr()
	}
	if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr()
		}
	}
	return netip.Addr{}
}

// clientKey is the limiter's key for a peer: its IPv4 address or IPv6 /64.
func clientKey(a net.Addr) string {
	if ip := peerAddr(a); ip.IsValid() {
		return ratelimit.ClientKey(ip)
	}
	return "unknown"
}

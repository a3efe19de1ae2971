package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/pires/go-proxyproto"
)

// Deliverer is what the SMTP server needs from storage; *storage.Store
// satisfies it.
type Deliverer interface {
	// Exists reports whether a live mailbox has address (case-insensitive).
	// Errors: storage.ErrUnavailable.
	Exists(ctx context.Context, address string) (bool, error)
	// Deliver stores m in the live mailbox at address in one Redis call.
	// Errors: storage.ErrMailboxNotFound, storage.ErrUnavailable.
	Deliver(ctx context.Context, address string, m storage.NewMessage) (storage.Summary, error)
}

// Limiter is what the SMTP server needs from ratelimit; *ratelimit.Limiter
// satisfies it. Errors wrap ratelimit.ErrUnavailable (or ErrInvalid for a bad
// rule, which withDefaults prevents).
type Limiter interface {
	Allow(ctx context.Context, r ratelimit.Rule, client string) (ratelimit.Decision, error)
	// AllowAll counts one hit on each rule in one round trip.
	AllowAll(ctx context.Context, client string, rules ...ratelimit.Rule) ([]ratelimit.Decision, error)
}

// The rule names of the per-IP limits; they name the limiter's keys.
const (
	ConnRuleName = "smtp-conn"
	MailRuleName = "smtp-mail"
)

// Config tunes the SMTP server. Zero values mean the defaults, applied in
// withDefaults.
type Config struct {
	// Domains are the receiving domains; RCPT to any other domain gets
	// 550 5.7.1. Default ["mayfly.test"]. Matched case-insensitively.
	Domains []string
	// Hostname is the name in the greeting and the EHLO reply. Default
	// "localhost".
	Hostname string
	// MaxMessageBytes is advertised as SIZE and enforced on the bytes
	// received (552 5.3.4). Default 10 MiB.
	MaxMessageBytes int64
	// MaxRecipients per transaction; past it RCPT gets 452 4.5.3 and the
	// sender sends the rest in a new transaction. Default 50.
	MaxRecipients int
	// MaxLineLength bounds one line, of a command or of the message.
	// go-smtp's own default of 2000 (RFC 5321's 1000, doubled) refuses real
	// mail: HTML generators emit unwrapped lines of tens of KiB. Longer
	// lines get 500 5.5.2 and the connection is closed. go-smtp buffers a
	// whole command line, so this is also the memory one session can pin
	// outside DATA. Default 256 KiB.
	MaxLineLength int
	// TLSConfig enables STARTTLS when set.
	TLSConfig *tls.Config
	// LimitsFailClosed refuses (451 4.3.0) a connection or transaction
	// whose per-IP limit cannot be checked because Redis is unavailable;
	// false (the default) admits it.
	LimitsFailClosed bool
	// ProxyProtocolFrom are the peers (a TCP load balancer) that must open
	// every connection with a PROXY protocol v1 or v2 header: the session's
	// client address, and so every per-IP limit, is the one the header
	// names. A connection from such a peer without a valid header, or with
	// a LOCAL one (a health check), is closed without a greeting. Any other
	// peer is not read for a header at all (SMTP is server-first: the
	// greeting cannot wait for one), so a PROXY line it sends is just an
	// unknown command. Empty: no PROXY protocol.
	ProxyProtocolFrom []netip.Prefix
	// MaxSessions caps the connections one node serves at once; past it a
	// new connection gets 421 4.4.5 and is closed. Default 1000.
	MaxSessions int
	// MaxSessionsPerIP caps the connections of one client (IPv4 address or
	// IPv6 /64) at once on one node: 421 4.7.0. Default 20.
	MaxSessionsPerIP int
	// ConnRule limits new connections per client across all nodes: 421
	// 4.7.0. Name defaults to ConnRuleName, Limit to 60, Window to a minute.
	ConnRule ratelimit.Rule
	// MailRule limits transactions (MAIL commands) per client across all
	// nodes: 421 4.7.0. Name defaults to MailRuleName, Limit to 120, Window
	// to a minute.
	MailRule ratelimit.Rule
	// MaxParses caps concurrent MIME parses on one node (parsing is CPU
	// bound). Default GOMAXPROCS.
	MaxParses int
	// MaxBufferBytes caps the message bytes all sessions of one node hold in
	// memory at once; a DATA that finds no room gets 451 4.3.1. Default
	// 256 MiB, and never less than MaxMessageBytes.
	MaxBufferBytes int64
	// RedisTimeout bounds each Redis call (recipient check, rate limit, one
	// recipient's delivery). Default 2 s.
	RedisTimeout time.Duration
	// ReadTimeout bounds the wait for each command (idle clients). Default
	// 60 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each reply write. Default 60 s.
	WriteTimeout time.Duration
	// DataTimeout bounds the whole message transfer of one DATA (slow
	// clients). Default 5 min.
	DataTimeout time.Duration
	// SessionTimeout bounds a whole connection, however busy. Default 15 min.
	SessionTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if len(c.Domains) == 0 {
		c.Domains = []string{"mayfly.test"}
	}
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	orDefault := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	orDuration := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 10 << 20
	}
	orDefault(&c.MaxRecipients, 50)
	orDefault(&c.MaxLineLength, 256<<10)
	orDefault(&c.MaxSessions, 1000)
	orDefault(&c.MaxSessionsPerIP, 20)
	orDefault(&c.MaxParses, runtime.GOMAXPROCS(0))
	if c.MaxBufferBytes <= 0 {
		c.MaxBufferBytes = 256 << 20
	}
	c.MaxBufferBytes = max(c.MaxBufferBytes, c.MaxMessageBytes)
	rule := func(r *ratelimit.Rule, name string, limit int) {
		if r.Name == "" {
			r.Name = name
		}
		orDefault(&r.Limit, limit)
		orDuration(&r.Window, time.Minute)
	}
	rule(&c.ConnRule, ConnRuleName, 60)
	rule(&c.MailRule, MailRuleName, 120)
	orDuration(&c.RedisTimeout, 2*time.Second)
	orDuration(&c.ReadTimeout, 60*time.Second)
	orDuration(&c.WriteTimeout, 60*time.Second)
	orDuration(&c.DataTimeout, 5*time.Minute)
	orDuration(&c.SessionTimeout, 15*time.Minute)
	return c
}

// Server is one ingest node's SMTP server. It accepts mail only for live
// mailboxes, parses each message once and stores it for every recipient.
type Server struct {
	store   Deliverer
	limiter Limiter
	parser  *Parser
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	smtp    *smtp.Server
	domains map[string]bool

	parses   chan struct{} // one token per parse in progress
	buffered atomic.Int64  // message bytes held by all sessions

	mu      sync.Mutex
	conns   map[*conn]struct{}
	perIP   map[string]int
	closing bool
	lns     []*listener
}

// New returns an SMTP server. metrics may be nil; log may be nil.
func New(store Deliverer, limiter Limiter, parser *Parser, cfg Config, log *slog.Logger, metrics *Metrics) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	s := &Server{
		store: store, limiter: limiter, parser: parser, cfg: cfg.withDefaults(), log: log, metrics: metrics,
		conns: make(map[*conn]struct{}), perIP: make(map[string]int),
	}
	s.domains = make(map[string]bool, len(s.cfg.Domains))
	for _, d := range s.cfg.Domains {
		s.domains[strings.ToLower(d)] = true
	}
	s.parses = make(chan struct{}, s.cfg.MaxParses)

	srv := smtp.NewServer(backend{s})
	srv.Domain = s.cfg.Hostname
	srv.MaxMessageBytes = s.cfg.MaxMessageBytes
	// The recipient cap is enforced in Rcpt, so that its 452 goes through
	// reply and the metrics like every other refusal.
	srv.MaxRecipients = 0
	srv.MaxLineLength = s.cfg.MaxLineLength
	srv.ReadTimeout = s.cfg.ReadTimeout
	srv.WriteTimeout = s.cfg.WriteTimeout
	srv.EnableSMTPUTF8 = true
	srv.TLSConfig = s.cfg.TLSConfig
	srv.ErrorLog = smtpLogger{log}
	s.smtp = srv
	return s
}

// Config returns the effective configuration, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Serve accepts connections on ln until Shutdown, then returns nil.
func (s *Server) Serve(ln net.Listener) error {
	if len(s.cfg.ProxyProtocolFrom) > 0 {
		ln = &proxyproto.Listener{Listener: ln, ConnPolicy: s.proxyPolicy, ReadHeaderTimeout: proxyHeaderTimeout}
	}
	l := newListener(ln, s)
	s.mu.Lock()
	closing := s.closing
	s.lns = append(s.lns, l)
	s.mu.Unlock()
	if closing {
		l.Close()
		return nil
	}
	err := s.smtp.Serve(l)
	if s.shuttingDown() {
		// Shutdown closed the listener before go-smtp knew it was closing.
		return nil
	}
	return err
}

// Shutdown stops accepting connections, lets every DATA in progress finish
// and closes every session at its next command with 421 (go-smtp's "Idle
// timeout" reply). When ctx ends first, the remaining connections are closed
// at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	lns := s.lns
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, l := range lns {
		l.Close()
	}
	now := time.Now()
	for _, c := range conns {
		c.shutdown(now)
	}
	err := s.smtp.Shutdown(ctx)
	if ctx.Err() != nil {
		// go-smtp's Close does nothing once Shutdown has begun, so the
		// connections are closed here; their goroutines then end.
		s.mu.Lock()
		conns = conns[:0]
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		return ctx.Err()
	}
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// proxyHeaderTimeout bounds how long a trusted proxy's connection may take
// to send its PROXY header.
const proxyHeaderTimeout = 5 * time.Second

// proxyPolicy requires a PROXY header from the trusted proxies and reads
// none from anyone else.
func (s *Server) proxyPolicy(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
	if ap, err := netip.ParseAddrPort(o.Upstream.String()); err == nil {
		ip := ap.Addr().Unmap()
		for _, p := range s.cfg.ProxyProtocolFrom {
			if p.Contains(ip) {
				return proxyproto.REQUIRE, nil
			}
		}
	}
	return proxyproto.SKIP, nil
}

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
	}
	s.conns[c] = struct{}{}
	s.perIP[c.ip]++
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
	s.metrics.sessions.Dec()
}

// admit decides whether a new connection may start a session and hands it
// to go-smtp through l, or answers 421 and closes it. It runs in its own
// goroutine, so a slow Redis never stalls the accept loop.
func (s *Server) admit(nc net.Conn, l *listener) {
	if pc, ok := nc.(*proxyproto.Conn); ok {
		// Reads the header (bounded by proxyHeaderTimeout), here in the
		// connection's own goroutine, never in the accept loop.
		if h := pc.ProxyHeader(); h == nil || h.Command.IsLocal() || h.SourceAddr == nil {
			s.metrics.rejections.WithLabelValues("proxy_header").Inc()
			s.log.Debug("smtp connection without a usable PROXY header from a trusted proxy", "ip", clientKey(pc.Raw().RemoteAddr()))
			nc.Close()
			return
		}
	}
	c := &conn{Conn: nc, srv: s, ip: clientKey(nc.RemoteAddr()), end: time.Now().Add(s.cfg.SessionTimeout)}
	if err := s.reserve(c); err != nil {
		s.refuseConn(c, err)
		return
	}
	// The connection and its first transaction are counted together, in one
	// round trip: the first MAIL then needs no Redis call of its own. A
	// connection that never sends MAIL has used one transaction of the
	// allowance anyway.
	connErr, mailErr := s.allowConn(c.ip)
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
	s.log.Debug("smtp connection refused", "ip", c.ip, "reason", reason(err))
	_ = c.Conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_ = writeReply(c.Conn, err)
	c.linger()
}

// allow counts one hit of client against r and returns refused when over
// the limit. A limiter that cannot reach Redis admits the hit unless
// Config.LimitsFailClosed: the limits protect Redis and the node, and with
// Redis down the recipient check already answers 451, so failing closed
// would mostly hide the real cause (the default); failing closed answers
// 451 4.3.0 at once instead.
func (s *Server) allow(r ratelimit.Rule, client string, refused error) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	d, err := s.limiter.Allow(ctx, r, client)
	if err != nil {
		return s.limitUnavailable(r.Name, client, err)
	}
	if !d.Allowed {
		return refused
	}
	return nil
}

// allowConn counts a new connection and its first transaction, and returns
// the refusal (or nil) of each; a Redis failure is handled as allow does.
func (s *Server) allowConn(client string) (conn, mail error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	ds, err := s.limiter.AllowAll(ctx, client, s.cfg.ConnRule, s.cfg.MailRule)
	if err != nil {
		err = s.limitUnavailable("conn+mail", client, err)
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

// limitUnavailable counts a limiter failure and returns what the hit gets:
// nil (admitted) unless Config.LimitsFailClosed.
func (s *Server) limitUnavailable(rule, client string, err error) error {
	s.metrics.redisErrors.Inc()
	if s.cfg.LimitsFailClosed {
		s.log.Warn("smtp rate limit unavailable; refusing", "rule", rule, "ip", client, "err", err)
		return err
	}
	s.log.Warn("smtp rate limit unavailable; admitting", "rule", rule, "ip", client, "err", err)
	return nil
}

// acquireBuffer reserves n message bytes of the node's buffer budget.
func (s *Server) acquireBuffer(n int64) bool {
	if s.buffered.Add(n) > s.cfg.MaxBufferBytes {
		s.buffered.Add(-n)
		return false
	}
	return true
}

func (s *Server) releaseBuffer(n int64) { s.buffered.Add(-n) }

// clientKey is the limiter's key for a peer: its IPv4 address or IPv6 /64.
func clientKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ratelimit.ClientKey(ta.AddrPort().Addr())
	}
	if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ratelimit.ClientKey(ap.Addr())
		}
	}
	return "unknown"
}

// listener hands go-smtp only the connections admit let through. Its own
// accept loop starts one admit goroutine per connection.
type listener struct {
	net.Listener
	srv   *Server
	conns chan *conn
	errc  chan error
	done  chan struct{}
	once  sync.Once
}

func newListener(ln net.Listener, s *Server) *listener {
	l := &listener{Listener: ln, srv: s, conns: make(chan *conn), errc: make(chan error, 1), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *listener) run() {
	var delay time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			// Out of file descriptors and the like: back off like net/http
			// instead of spinning or giving up.
			if !errors.Is(err, net.ErrClosed) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.srv.log.Warn("smtp accept", "err", err, "retry_in", delay.String())
				time.Sleep(delay)
				continue
			}
			l.errc <- err
			return
		}
		delay = 0
		go l.srv.admit(nc, l)
	}
}

// Accept returns the next admitted connection.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // every later call fails the same way
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the accept loop; it is safe to call more than once.
func (l *listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// lingerTime bounds how long a refused connection is drained before it is
// closed.
const lingerTime = 500 * time.Millisecond

// conn is an admitted connection. It holds the session slot until closed,
// clamps every read deadline to the session's end (SessionTimeout; for
// commands also the start of Shutdown), and can hang up right after the
// reply that refuses the session.
type conn struct {
	net.Conn
	srv *Server
	ip  string

	// firstMail is the decision on the connection's first transaction,
	// counted with the connection (see admit); counted says it is unused.
	// Only the session's goroutine touches them after admit.
	firstMail error
	counted   bool

	mu     sync.Mutex
	end    time.Time // SessionTimeout: no read deadline goes past it
	stop   time.Time // when Shutdown began; zero before
	inData bool      // Shutdown lets a DATA in progress finish

	hangup atomic.Int32 // 0 open, 1 close after the next write, 2 closing
	closed sync.Once
}

// clamp bounds a read deadline by the session's end and, for a command, by
// Shutdown.
func (c *conn) clamp(t time.Time, command bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.end
	if command && !c.stop.IsZero() {
		end = c.stop
	}
	if t.IsZero() || t.After(end) {
		return end
	}
	return t
}

// SetReadDeadline clamps t to the session's end: go-smtp resets the read
// deadline before every command, so this is where a whole-session bound and
// Shutdown reach it.
func (c *conn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t, true)) }

// SetDeadline clamps the read half like SetReadDeadline.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// Write writes, then closes the connection if the session was refused: the
// refusing reply (421) is the last thing the client reads.
func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.hangup.CompareAndSwap(1, 2) {
		c.linger()
	}
	return n, err
}

// hangUp arranges for the connection to close after the next reply.
func (c *conn) hangUp() { c.hangup.CompareAndSwap(0, 1) }

// hungUp reports whether the session was refused; commands the client
// pipelined after the refusal are answered without touching Redis.
func (c *conn) hungUp() bool { return c.hangup.Load() != 0 }

// startData marks a DATA in progress and sets its whole-transfer deadline.
// A DATA the client already started (it got 354) may finish even when
// Shutdown began a moment before: only the session's end bounds it, and
// Shutdown's own context bounds the wait.
func (c *conn) startData(d time.Duration) {
	c.mu.Lock()
	c.inData = true
	c.mu.Unlock()
	_ = c.Conn.SetReadDeadline(c.clamp(time.Now().Add(d), false))
}

func (c *conn) endData() {
	c.mu.Lock()
	c.inData = false
	c.mu.Unlock()
}

// shutdown ends the session at its next command: an idle read returns at
// once, a DATA in progress finishes first.
func (c *conn) shutdown(now time.Time) {
	c.mu.Lock()
	c.stop = now
	inData := c.inData
	c.mu.Unlock()
	if !inData {
		_ = c.Conn.SetReadDeadline(now)
	}
}

// linger closes after a refusal without losing the reply: closing a socket
// with unread input (pipelined commands) sends a RST, which can make the
// client's stack drop the reply still unread. So: FIN first, drain briefly,
// then close.
func (c *conn) linger() {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 64<<10))
	c.Close()
}

// Close closes the connection and frees its session slot; later calls are
// no-ops.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.closed.Do(func() {
		c.srv.release(c)
		err = c.Conn.Close()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// ownConn finds the admitted conn under go-smtp's connection, which is
// a *tls.Conn around it after STARTTLS.
func ownConn(nc net.Conn) (*conn, error) {
	for {
		switch c := nc.(type) {
		case *conn:
			return c, nil
		case *tls.Conn:
			nc = c.NetConn()
		default:
			return nil, fmt.Errorf("ingest: connection %T was not admitted by Serve", nc)
		}
	}
}

// smtpLogger sends go-smtp's internal log lines (connection errors, recovered
// panics) to slog.
type smtpLogger struct{ log *slog.Logger }

func (l smtpLogger) Printf(format string, v ...any) { l.print(fmt.Sprintf(format, v...)) }
func (l smtpLogger) Println(v ...any)               { l.print(fmt.Sprintln(v...)) }

func (l smtpLogger) print(msg string) {
	msg = strings.TrimSpace(msg)
	if strings.Contains(msg, "panic") {
		l.log.Error("smtp panic", "err", msg)
		return
	}
	// Mostly clients that vanish or fail the TLS handshake: noise at info.
	l.log.Debug("smtp connection error", "err", msg)
}

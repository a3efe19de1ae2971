package ingest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
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
	// Exists reports whether a live mailbox has address (ignoring ASCII case
	// only, see storage.LowerASCII; a sub-address names its inbox, see
	// storage.ParseRecipient).
	// Errors: storage.ErrBadSubaddress, storage.ErrLocalPartTooLong,
	// storage.ErrUnavailable.
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

	logCap    logCap        // lines about clients per second (Config.LogRate)
	parses    chan struct{} // one token per parse in progress
	lingering atomic.Int64  // refused connections lingering (maxLingering)

	bufMu    sync.Mutex
	buffered int64            // message bytes held by all sessions
	bufByIP  map[string]int64 // … by client

	mu      sync.Mutex
	conns   map[*conn]struct{}
	perIP   map[string]int
	perNet  map[netip.Prefix]int
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
		perNet: make(map[netip.Prefix]int), bufByIP: make(map[string]int64),
	}
	s.domains = make(map[string]bool, len(s.cfg.Domains))
	for _, d := range s.cfg.Domains {
		s.domains[storage.LowerASCII(d)] = true
	}
	s.parses = make(chan struct{}, s.cfg.MaxParses)
	s.logCap.perSecond = int64(s.cfg.LogRate)

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
	srv.TLSHandshake = metrics.tlsHandshake
	srv.ErrorLog = smtpLogger{log}
	s.smtp = srv
	metrics.registerCaps(s)
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

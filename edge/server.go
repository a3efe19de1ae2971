// Package edge serves Mayfly's public REST API over fasthttp: mailboxes,
// sessions, messages and (later) their event stream. It keeps no state of its
// own: every request is answered from storage and ratelimit, so any number of
// edge nodes can serve the same clients.
//
// edge does not read the environment, open Redis connections or speak SMTP;
// cmd/mayfly wires it.
package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/valyala/fasthttp"
)

// Mailboxes is what the edge needs from storage; *storage.Store satisfies it.
// Errors are storage's sentinels (ErrSessionInvalid, ErrCredentialInvalid,
// ErrMailboxNotFound, ErrMessageNotFound, ErrUnavailable).
type Mailboxes interface {
	Create(ctx context.Context, tag, domain string, lifetime time.Duration, owner string) (storage.Mailbox, storage.Credential, error)
	Select(ctx context.Context, id uuid.UUID, scoped storage.Credential) (storage.Mailbox, storage.Credential, error)
	Current(ctx context.Context, session storage.Credential) (storage.Mailbox, error)
	Extend(ctx context.Context, session storage.Credential, d time.Duration) (storage.Mailbox, string, error)
	Destroy(ctx context.Context, session storage.Credential) (string, error)
	MessagesJSON(ctx context.Context, session storage.Credential, p storage.Page) ([]storage.Encoded, bool, error)
	MessageJSON(ctx context.Context, session storage.Credential, id uuid.UUID) (storage.Encoded, error)
	DeleteMessage(ctx context.Context, session storage.Credential, id uuid.UUID) error
	Events
}

// Limiter is what the edge needs from ratelimit; *ratelimit.Limiter satisfies
// it. Errors wrap ratelimit.ErrUnavailable.
type Limiter interface {
	AllowRequest(ctx context.Context, client string) (ratelimit.Decision, error)
	Config() ratelimit.Config // the limits in force (RequestsPerSecond)
	ReserveCreation(ctx context.Context, client, mailbox string, lifetime time.Duration, valid bool) (ratelimit.Decision, error)
	AllowGlobalCreation(ctx context.Context) (ratelimit.Decision, error)
	Release(ctx context.Context, client, mailbox string) error
	ExtendActive(ctx context.Context, client, mailbox string, expiresAt time.Time) error
}

// Config tunes the edge. Zero values mean the defaults.
type Config struct {
	Domains        []string       // receiving domains; default ["mayfly.test"]
	CookiePrefix   string         // mailbox-scoped cookie prefix; default "mayfly"
	CookieInsecure bool           // omit the Secure attribute (local HTTP only)
	TrustedProxies []netip.Prefix // peers whose X-Forwarded-For is believed
	MaxInFlight    int            // concurrent requests before 503 REQUEST_PROTECTION; default 2048
	MaxBodyBytes   int            // request body limit behind 413; default 16 KiB
	RedisTimeout   time.Duration  // budget for the Redis calls of one request; default 2 s
	ReadTimeout    time.Duration  // default 10 s
	WriteTimeout   time.Duration  // default 10 s
	IdleTimeout    time.Duration  // keep-alive idle limit; default 60 s
	MaxStreams     int            // open event streams per node before 503 REQUEST_PROTECTION; default 20000
	MaxConns       int            // open connections per node (streams included); past it new ones get 503 and close; default 16384
	ConnsPerIP     int            // open connections per client (IPv4 address, IPv6 /64; trusted proxies exempt); default 256
	ConnsPerNet    int            // open connections per network (IPv4 /24, IPv6 /48; trusted proxies exempt); default 1024
	Heartbeat      time.Duration  // event-stream heartbeat interval; default 20 s
	AccessLog      AccessLog      // which answers get an access-log line; default AccessLogErrors
	AccessLogRate  int            // access-log lines per second per node, past it dropped; default 1000
	LogClientIP    LogClientIP    // how the access log names a client; default LogClientIPFull
}

func (c Config) withDefaults() Config {
	if len(c.Domains) == 0 {
		c.Domains = []string{"mayfly.test"}
	}
	if c.CookiePrefix == "" {
		c.CookiePrefix = "mayfly"
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 2048
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 16 << 10
	}
	if c.RedisTimeout <= 0 {
		c.RedisTimeout = 2 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 20000
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 16384
	}
	if c.ConnsPerIP <= 0 {
		c.ConnsPerIP = 256
	}
	if c.ConnsPerNet <= 0 {
		c.ConnsPerNet = 1024
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 20 * time.Second
	}
	if c.AccessLog == "" {
		c.AccessLog = AccessLogErrors
	}
	if c.AccessLogRate <= 0 {
		c.AccessLogRate = 1000
	}
	if c.LogClientIP == "" {
		c.LogClientIP = LogClientIPFull
	}
	return c
}

// Server is one edge node.
type Server struct {
	store    Mailboxes
	limiter  Limiter
	cfg      Config
	log      *slog.Logger
	metrics  *Metrics
	http     *fasthttp.Server
	inFlight atomic.Int64
	access   *accessLog

	hub         *hub
	beats       *beats                   // the event streams' heartbeat wheel
	workers     *idleWorkers[*sseStream] // serve streams
	counts      *idleWorkers[*countJob]  // countWith's request counts
	liveMu      sync.Mutex
	live        map[*sseStream]struct{} // open event streams, for Shutdown
	streams     atomic.Int64            // open event streams, for MaxStreams
	guard       *connGuard              // set by Serve
	conns       atomic.Int64            // open connections, counted by guard
	streamWG    sync.WaitGroup
	stopStreams chan struct{} // closed by Shutdown: every stream ends
	stopOnce    sync.Once
	draining    atomic.Bool // set by Drain
	// event streams a write timeout ended, for the log (events.go)
	writeTimeouts timeoutLog
	// what this node saw of each client's request rate (wrap)
	hint *rateHint
}

// New returns an edge server. metrics may be nil.
func New(store Mailboxes, limiter Limiter, cfg Config, log *slog.Logger, metrics *Metrics) *Server {
	s := &Server{store: store, limiter: limiter, cfg: cfg.withDefaults(), log: log, metrics: metrics,
		hub: newHub(store), stopStreams: make(chan struct{}), hint: newRateHint(), live: map[*sseStream]struct{}{}}
	s.beats = newBeats(s, s.cfg.Heartbeat)
	s.workers = newIdleWorkers(streamWorkersIdle, s.serve)
	s.counts = newIdleWorkers(countWorkersIdle, s.count)
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	s.access = &accessLog{mode: s.cfg.AccessLog, ip: s.cfg.LogClientIP, log: log, perSecond: int64(s.cfg.AccessLogRate),
		dropped: s.metrics.accessDropped.Inc}
	s.http = &fasthttp.Server{
		Handler:      s.routes(),
		ErrorHandler: s.handleTransportError,
		Name:         "mayfly",
		// A body past MaxBodyBytes still reaches the handler up to this bound so
		// that the 413 passes the rate limiters; past it fasthttp refuses.
		MaxRequestBodySize:            4 * s.cfg.MaxBodyBytes,
		ReadTimeout:                   s.cfg.ReadTimeout,
		WriteTimeout:                  s.cfg.WriteTimeout,
		IdleTimeout:                   s.cfg.IdleTimeout,
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 false,
		DisableHeaderNamesNormalizing: false,
		ReadBufferSize:                readBufferSize,
		// A body is read as the bytes it is, whatever its Content-Type: the
		// API takes JSON only, and fasthttp's multipart pre-parsing would
		// answer a bad form with its own plain-text 400.
		DisablePreParseMultipartForm: true,
		// An event stream owns its connection after the hijack and closes
		// it itself (handleEvents).
		KeepHijackedConns: true,
		Logger:            slogPrinter{log},
	}
	s.metrics.registerServer(s)
	return s
}

// Serve accepts connections on ln until Shutdown, within the connection
// caps, and outlives accept errors such as running out of descriptors.
func (s *Server) Serve(ln net.Listener) error {
	s.guard = newConnGuard(ln, s.log, &s.conns, s.cfg.MaxConns, s.cfg.ConnsPerIP, s.cfg.ConnsPerNet, s.cfg.TrustedProxies,
		func(kind string) { s.metrics.rejections.WithLabelValues(kind).Inc() })
	return s.http.Serve(s.guard)
}

// Drain marks the node as going away while it still serves: every answer
// from now on closes its connection (Connection: close), so that a client
// holding a keep-alive connection to this node (through a TCP load
// balancer such as a Kubernetes Service, which balances connections, not
// requests) opens a new one for its next request, and the balancer, which
// no longer lists the node, sends it elsewhere. Event streams are left
// alone until Shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops accepting, ends every event stream, and waits for requests
// in flight until ctx ends. The caller drains first (cmd/mayfly's
// MAYFLY_DRAIN_DELAY): by now the load balancer sends new connections to
// other nodes, so a stream's client that reconnects lands on one of them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopStreams); close(s.workers.stop); close(s.counts.stop) })
	s.stopAllStreams()
	defer s.beats.close()
	err := s.http.ShutdownWithContext(ctx)
	done := make(chan struct{})
	go func() { s.streamWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// shutdownHint is what an event stream writes before it ends at Shutdown: a
// retry field (the reconnection delay an EventSource waits; 1-6 s, drawn
// per stream, for a stream that merely ended otherwise) of 0.25-1.25 s, spread so that the
// streams of a node do not all come back in the same instant, and a comment
// saying why, then the stream ends cleanly. The client reconnects to another
// node, and lists (the spec's client does after any reconnect).
func shutdownHint() string {
	return "retry: " + strconv.Itoa(250+rand.IntN(1000)) + "\n: node shutting down; reconnect\n\n"
}

// Handler returns the request handler (for tests that serve it themselves).
func (s *Server) Handler() fasthttp.RequestHandler { return s.http.Handler }

// handleTransportError answers requests fasthttp could not read, in the
// error envelope like every other answer.
func (s *Server) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	ctx.SetConnectionClose()
	if isBodyTooLarge(err) {
		// The headers were read: the request goes through the routes like any
		// other, so it counts against the per-IP rate and, for POST
		// /mailboxes, the creation windows (docs/api.md: every request counts),
		// and is answered 413. The client may still be sending its body:
		// the connection drains it before it closes, so that a client that
		// writes its whole body before reading (no Expect: 100-continue)
		// reads the 413 instead of a reset.
		ctx.SetUserValue(bodyRefusedKey, true)
		ctx.Request.ResetBody()
		if gc, ok := ctx.Conn().(*guardedConn); ok {
			gc.drainOnClose(s.cfg.ReadTimeout)
		}
		s.http.Handler(ctx)
		ctx.SetConnectionClose()
		return
	}
	if isTimeout(err) {
		// No request came within ReadTimeout: a connection an HTTP client
		// opened and kept spare, or one that stalled. It is closed without
		// an answer, as fasthttp closes an idle keep-alive connection: an
		// answer nobody asked for is read by the client as the answer to
		// the next request it sends on that connection (Go's transport logs
		// "Unsolicited response on idle HTTP channel").
		_ = ctx.Conn().Close()
		return
	}
	start := time.Now()
	setRequestID(ctx)
	setCommonHeaders(ctx)
	defer func() { s.access.record(ctx, "unreadable request", start, nil) }()
	// Not HTTP we can read (a malformed request line or header, headers
	// over the read buffer): still the API's envelope, and the connection
	// closes, since where the next request would start is unknown.
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		writeError(ctx, errHeadersTooLarge.with(map[string]any{"limit_bytes": readBufferSize}))
		return
	}
	writeError(ctx, errMalformed)
}

// isTimeout reports a read deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// conflictingLength reports a request that carries both Transfer-Encoding
// and Content-Length. RFC 9112 §6.1: the server must close the connection
// after answering it; a proxy that believed the Content-Length would read a
// different request boundary than we do (request smuggling).
func conflictingLength(h *fasthttp.RequestHeader) bool {
	var te, cl bool
	for line := range bytes.SplitSeq(h.RawHeaders(), []byte("\n")) {
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name = bytes.TrimSpace(name)
		te = te || bytes.EqualFold(name, []byte("Transfer-Encoding"))
		cl = cl || bytes.EqualFold(name, []byte("Content-Length"))
	}
	return te && cl
}

// readBufferSize bounds the request line plus headers (fasthttp reads them
// into this buffer): past it, 431 HEADERS_TOO_LARGE.
const readBufferSize = 8 << 10

const requestIDKey = "mayfly.request_id"

// bodyRefusedKey marks a request whose body fasthttp refused to read (past
// its MaxRequestBodySize): it is routed and answered 413 without a body.
const bodyRefusedKey = "mayfly.body_refused"

func bodyRefused(ctx *fasthttp.RequestCtx) bool {
	refused, _ := ctx.UserValue(bodyRefusedKey).(bool)
	return refused
}

// setRequestID gives the request an id for logs, the X-Request-ID header and
// the error body.
func setRequestID(ctx *fasthttp.RequestCtx) string {
	id := randomID()
	ctx.SetUserValue(requestIDKey, id)
	ctx.Response.Header.Set("X-Request-ID", id)
	return id
}

// randomID is 16 hex digits from the fast, unpredictable math/rand/v2
// source: for request ids and stream tokens, which identify but grant nothing.
func randomID() string {
	var b [16]byte
	return string(strconv.AppendUint(b[:0], rand.Uint64()|1<<63, 16)) // the top bit fixes the length
}

func requestID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue(requestIDKey).(string)
	return id
}

func setCommonHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// clientKey is the rate-limit identity of the request's client.
func (s *Server) clientKey(ctx *fasthttp.RequestCtx) string {
	return ratelimit.ClientKey(clientIP(ctx, s.cfg.TrustedProxies))
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, args ...any) {
	// fasthttp's own messages name connection errors, never request content.
	p.log.Debug("fasthttp", "msg", fmt.Sprintf(format, args...))
}

func isBodyTooLarge(err error) bool { return errors.Is(err, fasthttp.ErrBodyTooLarge) }

func isUnavailable(err error) bool { return errors.Is(err, storage.ErrUnavailable) }

// Command mayfly runs a Mayfly node: `mayfly edge` serves the REST API,
// `mayfly ingest` accepts mail over SMTP, `mayfly all` does both in one
// process; `mayfly inbox` is the client tool (package clients/go/cli).
// Configuration comes from MAYFLY_* environment variables (see config.go and
// docs/settings.md). This is the only package that reads the environment, builds
// the Redis client, sets up logging and handles signals.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/clients/go/cli"
	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/internal/certreload"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inbox" {
		// The client tool: it handles its own signals and exit codes.
		os.Exit(cli.Main("mayfly inbox", os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mayfly:", err)
		os.Exit(1)
	}
}

const usage = `usage: mayfly <command>

commands:
  edge    serve the REST API (MAYFLY_HTTP_ADDR)
  ingest  accept mail over SMTP for live mailboxes (MAYFLY_SMTP_ADDR)
  all     edge and ingest in one process
  inbox   the client tool: create an inbox, wait for mail, read it
          (mayfly inbox --help; clients/go/cli)
  version print the version, revision, Go version and storage layouts
  settings print every MAYFLY_* setting: its value, default and source
          (env or default; secrets masked), and what would stop a node

Every node command also serves the admin endpoints (MAYFLY_ADMIN_ADDR).

Configuration is read from MAYFLY_* environment variables. The pages of
the repository's docs/:
  docs/settings.md    every setting and its default (mayfly settings)
  docs/api.md         the HTTP API: a curl walk-through, its decisions, error codes
  docs/cli.md         mayfly inbox
  docs/testing.md     using Mayfly from a test suite: the dev profile, CI
  docs/operations.md  deploying; the admin endpoints, metrics, logs
`

// run runs the node named by args until ctx ends, configured by environ
// (KEY=VALUE, as os.Environ). Tests call it too.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		fmt.Fprint(stderr, usage)
		return errors.New("expected one command")
	}
	var serveHTTP, serveSMTP bool
	switch args[0] {
	case "edge":
		serveHTTP = true
	case "ingest":
		serveSMTP = true
	case "all":
		serveHTTP, serveSMTP = true, true
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		printVersion(stdout, readBuild())
		return nil
	case "settings":
		return printSettings(stdout, environ)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	if err := unknownSettings(environ); err != nil {
		return err
	}
	cfg, err := loadConfig(lookup(environ))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	bin := readBuild()
	log.Info("starting", "command", args[0], "version", bin.version, "revision", bin.revision)
	// SIGHUP reloads the STARTTLS certificate; it never stops a node (Go's
	// default for it is to exit), whatever the node serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tlsConfig *tls.Config
	var certs *certreload.Reloader
	if serveSMTP && cfg.smtp.tlsCert != "" {
		certs, err = certreload.New(cfg.smtp.tlsCert, cfg.smtp.tlsKey, log.With("kind", "smtp"))
		if err != nil {
			return fmt.Errorf("MAYFLY_SMTP_TLS_CERT/MAYFLY_SMTP_TLS_KEY: %w", err)
		}
		// Asked at every STARTTLS: a renewed certificate is served by the
		// next handshake after the poll or SIGHUP loaded it.
		tlsConfig = &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go certs.Watch(watchCtx, cfg.smtp.tlsReload)
	}
	hupDone := make(chan struct{})
	defer close(hupDone)
	go func() {
		for {
			select {
			case <-hupDone:
				return
			case <-hup:
			}
			if certs == nil {
				log.Info("SIGHUP: nothing to reload (no MAYFLY_SMTP_TLS_CERT)")
				continue
			}
			_ = certs.Reload() // logs its outcome
		}
	}()

	fdBudget := raiseFDLimit(log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Bind every listener before anything else, so a busy port fails fast.
	adminLn, err := net.Listen("tcp", cfg.adminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	var httpLn, smtpLn net.Listener
	closeListeners := func() {
		for _, ln := range []net.Listener{httpLn, smtpLn} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	if serveHTTP {
		if httpLn, err = net.Listen("tcp", cfg.httpAddr); err != nil {
			adminLn.Close()
			return fmt.Errorf("http listener: %w", err)
		}
	}
	if serveSMTP {
		if smtpLn, err = net.Listen("tcp", cfg.smtpAddr); err != nil {
			adminLn.Close()
			closeListeners()
			return fmt.Errorf("smtp listener: %w", err)
		}
	}

	var client rueidis.Client // set once connected; /readyz is 503 until then
	ready := make(chan struct{})
	var draining atomic.Bool // from the stop signal on, /readyz is 503
	withPprof := pprofEnabled(cfg.adminPprof, adminLn.Addr())
	mux := adminMux(reg, func(ctx context.Context) error {
		if draining.Load() {
			return errDraining
		}
		select {
		case <-ready:
		default:
			return errors.New("redis not connected yet")
		}
		return reachable(ctx, client)
	}, withPprof)
	api := ""
	if httpLn != nil {
		api = "http://" + httpLn.Addr().String() + "/v1"
	}
	handleAdminNotFound(mux, api)
	admin := &http.Server{Handler: mux,
		// The admin listener is for operators and scrapers, never the public:
		// still, no peer may hold it with slow headers or idle connections.
		// net/http retries accept errors (EMFILE) with a backoff by itself.
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 2 * time.Minute, // pprof's CPU profile writes for 30 s by default
		IdleTimeout:  time.Minute, MaxHeaderBytes: 16 << 10}
	go func() {
		if err := admin.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener", "err", err)
		}
	}()
	defer admin.Close()
	log.Info("listening", "kind", "admin", "addr", adminLn.Addr().String(), "pprof", withPprof)

	client, err = connect(ctx, cfg, log)
	if err != nil {
		closeListeners()
		return err
	}
	defer client.Close()
	close(ready)
	// The Redis settings that lose acknowledged mail stop the node here;
	// the check runs again while it serves (mayfly_redis_setting_ok).
	redisCheck := newRedisChecker(client, cfg.allowEviction, log)
	if err := redisCheck.start(ctx); err != nil {
		closeListeners()
		return err
	}
	reg.MustRegister(redisCheck)
	checkCtx, stopCheck := context.WithCancel(context.Background())
	defer stopCheck()
	go redisCheck.run(checkCtx)

	store := storage.New(client, storage.Config{
		KeyPrefix: cfg.redisPrefix, MaxMessages: cfg.maxMessages,
		MaxMailboxBytes: cfg.maxMailboxBytes, MaxMessageBytes: cfg.maxMessageBytes,
		MinReplicas: cfg.minReplicas, ReplicaTimeout: cfg.replicaTimeout, Logger: log,
	})
	registerWriteStats(reg, store)
	limiter := ratelimit.New(client, ratelimit.Config{
		KeyPrefix: cfg.redisPrefix, RequestsPerSecond: cfg.ratePerSecond,
		CreatePerMinute: cfg.createPerMinute, CreatePerHour: cfg.createPerHour, CreatePerDay: cfg.createPerDay,
		ActivePerClient: cfg.activePerIP, GlobalCreatePerMinute: cfg.globalPerMinute,
		NetCreatePerMinute: cfg.netPerMinute, NetCreatePerHour: cfg.netPerHour,
		NetCreatePerDay: cfg.netPerDay, NetActive: cfg.netActive,
	})
	// The layout this node writes: decided with the fleet before any write.
	guard, err := storage.NewLayoutGuard(client, storage.GuardConfig{
		KeyPrefix: cfg.redisPrefix, Setting: cfg.writeLayout, Version: bin.version, Logger: log,
	})
	if err != nil {
		closeListeners()
		return err
	}
	applyLayout := func(layout string) {
		_ = store.SetWriteLayout(layout) // a name the guard checked
		limiter.SetZSetSlots(layout == storage.Layout20261124)
		limiter.SetNetworkShares(layout >= storage.Layout20261126)
		// The folds follow the fleet's layout: while it is the fold layout
		// or newer, every live node reads them (the guard refuses others).
		limiter.SetFold(guard.Fleet() >= storage.LayoutFold, guard.FoldDecides())
	}
	layout, err := checkLayout(ctx, guard, log)
	if err != nil {
		closeListeners()
		return err
	}
	applyLayout(layout)
	log.Info("storage layout", "writes", layout, "fleet", guard.Fleet(), "reads", strings.Join(storage.Layouts, ","))
	registerBuildInfo(reg, bin, store.WriteLayout) // the guard's layout, and each one it follows
	guardCtx, stopGuard := context.WithCancel(context.Background())
	defer stopGuard()
	go guard.Run(guardCtx, applyLayout)
	defer func() {
		stopGuard()
		lctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = guard.Leave(lctx)
	}()
	// Each server reports its end on serveErr; stops are called on shutdown.
	serveErr := make(chan error, 2)
	var stops []func(context.Context) error
	var drains []func() // called when the drain starts
	if serveHTTP {
		ecfg := edge.Config{
			Domains: cfg.domains, CookiePrefix: cfg.cookiePrefix, CookieInsecure: !cfg.cookieSecure,
			TrustedProxies: cfg.trustedProxies, MaxInFlight: cfg.maxInFlight, MaxBodyBytes: cfg.maxBodyBytes,
			RedisTimeout: cfg.redisTimeout, MaxStreams: cfg.maxStreams, Heartbeat: cfg.heartbeat,
			MaxConns: min(cfg.maxConns, fdBudget), ConnsPerIP: cfg.connsPerIP, ConnsPerNet: cfg.connsPerNet,
			AccessLog: edge.AccessLog(cfg.accessLog), AccessLogRate: cfg.accessLogRate,
			LogClientIP: edge.LogClientIP(cfg.logClientIP),
		}
		logClamps(log, append(edgeClamps(cfg, ecfg), limiterClamps(cfg, limiter.Config())...))
		api := edge.New(store, limiter, ecfg, log, edge.NewMetrics(reg))
		go func() {
			if err := api.Serve(httpLn); err != nil {
				serveErr <- fmt.Errorf("http listener: %w", err)
			}
		}()
		stops = append(stops, api.Shutdown)
		drains = append(drains, api.Drain)
		log.Info("listening", "kind", "http", "addr", httpLn.Addr().String(), "domains", cfg.domains)
	}
	if serveSMTP {
		mta := ingest.New(store, limiter, ingest.NewParser(ingest.ParserConfig{RemoteImages: cfg.smtp.remoteImages}),
			smtpServerConfig(cfg, tlsConfig), log, ingest.NewMetrics(reg))
		logClamps(log, ingestClamps(cfg, mta.Config()))
		go func() {
			if err := mta.Serve(smtpLn); err != nil {
				serveErr <- fmt.Errorf("smtp listener: %w", err)
			}
		}()
		stops = append(stops, mta.Shutdown)
		log.Info("listening", "kind", "smtp", "addr", smtpLn.Addr().String(), "domains", cfg.domains,
			"starttls", tlsConfig != nil)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		closeListeners()
		return err
	}
	// The drain: /readyz answers 503 while the node keeps serving, so that
	// load balancers (haproxy's checks, Kubernetes' readiness probe) stop
	// sending it new connections before its listeners close, and the
	// edge's answers close their keep-alive connections. Only then do
	// the servers stop: the listeners close, event streams end with a
	// reconnect hint (their clients reconnect to another node and list),
	// and requests and SMTP transactions in flight finish.
	draining.Store(true)
	for _, drain := range drains {
		drain()
	}
	var failed error // a listener that failed during the drain ends it
	if cfg.drainDelay > 0 {
		log.Info("draining: /readyz answers 503, still serving", "drain_delay", cfg.drainDelay.String())
		select {
		case <-time.After(cfg.drainDelay):
		case failed = <-serveErr:
		}
	}
	log.Info("shutting down", "shutdown_timeout", cfg.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// Both servers drain at once, within the one shutdown budget.
	errs := make(chan error, len(stops))
	for _, stop := range stops {
		go func() { errs <- stop(sctx) }()
	}
	var shutdownErr error
	for range stops {
		if err := <-errs; err != nil && shutdownErr == nil {
			shutdownErr = fmt.Errorf("shutdown: %w", err)
		}
	}
	if failed != nil {
		return failed
	}
	return shutdownErr
}

// checkLayout asks the layout guard which layout to write, retrying while
// Redis is unreachable (as connect does) and giving up on a refusal, whose
// text says what to do.
func checkLayout(ctx context.Context, guard *storage.LayoutGuard, log *slog.Logger) (string, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		layout, err := guard.Check(cctx)
		cancel()
		if err == nil || errors.Is(err, storage.ErrLayoutRefused) {
			if err != nil {
				log.Error("storage layout refused", "err", err)
			}
			return layout, err
		}
		log.Warn("storage layout guard not reachable; retrying", "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("storage layout guard: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// smtpServerConfig is the ingest server's configuration from the environment.
func smtpServerConfig(cfg config, tlsConfig *tls.Config) ingest.Config {
	hostname := cfg.smtp.hostname
	if hostname == "" {
		hostname, _ = os.Hostname() // empty on failure: ingest's default
	}
	minute := time.Minute
	minDataRate := int64(cfg.smtp.minDataRate)
	if minDataRate == 0 {
		minDataRate = -1 // no floor
	}
	return ingest.Config{
		Domains:             cfg.domains,
		Hostname:            hostname,
		MaxMessageBytes:     int64(cfg.smtp.maxBytes),
		MaxRecipients:       cfg.smtp.maxRecipients,
		MaxRefusedRcpts:     cfg.smtp.maxRefused,
		MaxLineLength:       cfg.smtp.maxLineBytes,
		TLSConfig:           tlsConfig,
		RequireTLS:          cfg.smtp.requireTLS,
		ProxyProtocolFrom:   cfg.smtp.proxyFrom,
		LimitsFailClosed:    cfg.smtp.limitsClosed,
		MaxSessions:         cfg.smtp.maxSessions,
		MaxSessionsPerIP:    cfg.smtp.sessionsPerIP,
		MaxSessionsPerNet:   cfg.smtp.sessionsPerNet,
		IdleSessionTimeout:  cfg.smtp.idleTimeout,
		ConnRule:            ratelimit.Rule{Name: ingest.ConnRuleName, Limit: cfg.smtp.connPerMinute, Window: minute},
		MailRule:            ratelimit.Rule{Name: ingest.MailRuleName, Limit: cfg.smtp.mailPerMinute, Window: minute},
		Relays:              cfg.smtp.relays,
		RelayConnRule:       ratelimit.Rule{Name: ingest.RelayConnRuleName, Limit: cfg.smtp.relayConn, Window: minute},
		RelayMailRule:       ratelimit.Rule{Name: ingest.RelayMailRuleName, Limit: cfg.smtp.relayMail, Window: minute},
		MaxParses:           cfg.smtp.maxParses,
		MaxBufferBytes:      int64(cfg.smtp.bufferBytes),
		MaxBufferBytesPerIP: int64(cfg.smtp.bufferPerIP),
		MinDataRate:         minDataRate,
		DataRateWindow:      cfg.smtp.rateWindow,
		RedisTimeout:        cfg.redisTimeout,
		ReadTimeout:         cfg.smtp.readTimeout,
		DataTimeout:         cfg.smtp.dataTimeout,
		SessionTimeout:      cfg.smtp.sessionTimeout,
		LogRate:             cfg.smtp.logRate,
		LogClientIP:         ingest.LogClientIP(cfg.logClientIP),
	}
}

// connect builds the one Redis client, retrying until Redis answers or ctx
// ends: a node started before its Redis waits instead of crashing. A refused
// password or an untrusted certificate is not worth waiting for: the node
// stops and says which settings to check.
func connect(ctx context.Context, cfg config, log *slog.Logger) (rueidis.Client, error) {
	opt := storage.ClientOption(cfg.redisAddrs, cfg.redisTimeout)
	opt.MaxFlushDelay = cfg.redisFlush
	cfg.redis.apply(&opt)
	log.Info("redis", append([]any{"addrs", cfg.redisAddrs, "prefix", cfg.redisPrefix}, cfg.redis.logAttrs()...)...)
	backoff := 100 * time.Millisecond
	for {
		client, err := rueidis.NewClient(opt)
		if err == nil {
			return client, nil
		}
		if perr := permanentRedisError(err); perr != nil {
			log.Error("redis refused the connection", "addrs", cfg.redisAddrs, "err", perr)
			return nil, perr
		}
		attrs := []any{"addrs", cfg.redisAddrs, "err", err, "retry_in", backoff.String()}
		if hint := redisRetryHint(cfg.redis, err); hint != "" {
			attrs = append(attrs, "hint", hint)
		}
		log.Warn("redis not reachable; retrying", attrs...)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to redis: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

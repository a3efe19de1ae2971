// Command mayfly runs a Mayfly node: `mayfly edge` serves the REST API.
// Configuration comes from MAYFLY_* environment variables (see config.go and
// the README). This is the only package that reads the environment, builds
// the Redis client, sets up logging and handles signals.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mayfly:", err)
		os.Exit(1)
	}
}

const usage = `usage: mayfly <command>

commands:
  edge    serve the REST API (MAYFLY_HTTP_ADDR)

Configuration is read from MAYFLY_* environment variables; see README.md.
`

// run runs the node named by args until ctx ends. Tests call it too.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		fmt.Fprint(stderr, usage)
		return errors.New("expected one command")
	}
	switch args[0] {
	case "edge":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Bind every listener before anything else, so a busy port fails fast.
	adminLn, err := net.Listen("tcp", cfg.adminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	httpLn, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		adminLn.Close()
		return fmt.Errorf("http listener: %w", err)
	}

	var client rueidis.Client // set once connected; /readyz is 503 until then
	ready := make(chan struct{})
	admin := &http.Server{Handler: adminMux(reg, func(ctx context.Context) error {
		select {
		case <-ready:
		default:
			return errors.New("redis not connected yet")
		}
		return client.Do(ctx, client.B().Ping().Build()).Error()
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := admin.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener", "err", err)
		}
	}()
	defer admin.Close()
	log.Info("listening", "kind", "admin", "addr", adminLn.Addr().String())

	client, err = connect(ctx, cfg, log)
	if err != nil {
		httpLn.Close()
		return err
	}
	defer client.Close()
	close(ready)

	store := storage.New(client, storage.Config{
		KeyPrefix: cfg.redisPrefix, MaxMessages: cfg.maxMessages,
		MaxMailboxBytes: cfg.maxMailboxBytes, MaxMessageBytes: cfg.maxMessageBytes,
	})
	limiter := ratelimit.New(client, ratelimit.Config{
		KeyPrefix: cfg.redisPrefix, RequestsPerSecond: cfg.ratePerSecond,
		CreatePerMinute: cfg.createPerMinute, CreatePerHour: cfg.createPerHour, CreatePerDay: cfg.createPerDay,
		ActivePerClient: cfg.activePerIP, GlobalCreatePerMinute: cfg.globalPerMinute,
	})
	api := edge.New(store, limiter, edge.Config{
		Domains: cfg.domains, CookiePrefix: cfg.cookiePrefix, CookieInsecure: !cfg.cookieSecure,
		TrustedProxies: cfg.trustedProxies, MaxInFlight: cfg.maxInFlight, MaxBodyBytes: cfg.maxBodyBytes,
		RedisTimeout: cfg.redisTimeout,
	}, log, edge.NewMetrics(reg))

	serveErr := make(chan error, 1)
	go func() { serveErr <- api.Serve(httpLn) }()
	log.Info("listening", "kind", "http", "addr", httpLn.Addr().String(), "domains", cfg.domains)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("http listener: %w", err)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := api.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// connect builds the one Redis client, retrying until Redis answers or ctx
// ends: a node started before its Redis waits instead of crashing.
func connect(ctx context.Context, cfg config, log *slog.Logger) (rueidis.Client, error) {
	backoff := 100 * time.Millisecond
	for {
		client, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:      cfg.redisAddrs,
			DisableCache:     true, // no client-side caching: every read must see the latest write
			ShuffleInit:      true,
			ConnWriteTimeout: cfg.redisTimeout,
		})
		if err == nil {
			return client, nil
		}
		log.Warn("redis not reachable; retrying", "addrs", cfg.redisAddrs, "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to redis: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// env is one edge node on a loopback port, over the real cluster, with a key
// prefix of its own so tests run in parallel.
type env struct {
	t       testing.TB
	base    string // http://127.0.0.1:port/v1
	store   *storage.Store
	limiter *ratelimit.Limiter
	client  rueidis.Client
	prefix  string
	srv     *edge.Server
	opts    []option
	logs    *logBuffer
	reg     *prometheus.Registry // the node's metrics
}

type option func(*edge.Config, *ratelimit.Config)

func newEnv(t testing.TB, opts ...option) *env {
	t.Helper()
	return newEnvOn(t, storagetest.Client(t), opts...)
}

// newEnvOn serves an edge node that uses client for Redis.
func newEnvOn(t testing.TB, client rueidis.Client, opts ...option) *env {
	t.Helper()
	return serveEnv(t, client, storagetest.Prefix(t), opts)
}

// newEnvAt serves an edge node listening on addr (e.g. "[::1]:0").
func newEnvAt(t testing.TB, addr string, opts ...option) *env {
	t.Helper()
	return serveEnvAt(t, addr, storagetest.Client(t), storagetest.Prefix(t), opts)
}

// sibling is a second edge node over the same Redis keys: another node of
// the same cluster of stateless nodes, with its own Redis connections.
func (e *env) sibling(t testing.TB) *env {
	return serveEnv(t, storagetest.Client(t), e.prefix, e.opts)
}

// tight is a node over e's Redis keys and client with opts added (a tight
// Redis budget, say), and u the same client (jar and IP) through it. A test
// sets up through e, whose default budget a loaded machine's first
// requests (connections, script loads) stay within, and probes through the
// returned node.
func (e *env) tight(t testing.TB, u *user, opts ...option) (*env, *user) {
	t.Helper()
	n := serveEnv(t, e.client, e.prefix, append(slices.Clone(e.opts), opts...))
	return n, &user{e: n, hc: u.hc, ip: u.ip}
}

func serveEnv(t testing.TB, client rueidis.Client, prefix string, opts []option) *env {
	return serveEnvAt(t, "127.0.0.1:0", client, prefix, opts)
}

func serveEnvAt(t testing.TB, addr string, client rueidis.Client, prefix string, opts []option) *env {
	cfg := edge.Config{
		Domains:        []string{"mayfly.test", "inbox.test"},
		CookieInsecure: true, // the test jar talks plain HTTP
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
	rl := ratelimit.Config{KeyPrefix: prefix}
	for _, o := range opts {
		o(&cfg, &rl)
	}
	store := storage.New(client, storage.Config{KeyPrefix: prefix})
	limiter := ratelimit.New(client, rl)
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	srv := edge.New(store, limiter, cfg, slog.New(slog.NewJSONHandler(logs, nil)), edge.NewMetrics(reg))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &env{t: t, base: "http://" + ln.Addr().String() + "/v1", store: store, limiter: limiter, client: client, prefix: prefix, srv: srv, opts: opts, logs: logs, reg: reg}
}

// metric is the node's series name, summed over its labels (0 when absent).
func (e *env) metric(name string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	var v float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return v
}

// awaitMetric waits up to within for the node's series name to equal want,
// and returns how long that took.
func (e *env) awaitMetric(name string, want float64, within time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	for {
		got := e.metric(name)
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			e.t.Fatalf("%s = %v after %v, want %v", name, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logBuffer holds a node's JSON log lines (the access log among them).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// user is one API client with its own cookie jar. Its requests carry an
// X-Forwarded-For (the test node trusts 127.0.0.1) so the per-IP limits see
// the IP the test chose: a fixed one for limit tests, else a fresh one per
// request so other tests never trip the 8 requests per second.
type user struct {
	e  *env
	hc *http.Client
	ip string
}

func (e *env) newUser(ip string) *user {
	jar, _ := cookiejar.New(nil)
	return &user{e: e, ip: ip, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func randomIP() string {
	return fmt.Sprintf("198.18.%d.%d", rand.IntN(256), 1+rand.IntN(254))
}

type result struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	resp   *http.Response
}

// code is the error code of an error response.
func (r *result) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// data returns data.<name> of a success response.
func (r *result) data(name string) map[string]any {
	d, _ := r.body["data"].(map[string]any)
	v, _ := d[name].(map[string]any)
	return v
}

func (u *user) do(method, path, body string, headers ...string) *result {
	u.e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u.e.base+path, rd)
	if err != nil {
		u.e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	ip := u.ip
	if ip == "" {
		ip = randomIP()
	}
	req.Header.Set("X-Forwarded-For", ip)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		u.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		u.e.t.Fatal(err)
	}
	checkResponse(u.e.t, req, resp, raw)
	r := &result{status: resp.StatusCode, header: resp.Header, raw: raw, resp: resp}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			u.e.t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
		}
	}
	return r
}

func (u *user) want(r *result, status int, code string) {
	u.e.t.Helper()
	if r.status != status || r.code() != code {
		u.e.t.Fatalf("status %d %s (%s), want %d %s", r.status, r.code(), r.raw, status, code)
	}
}

// create makes a mailbox and returns its JSON.
func (u *user) create(body string) map[string]any {
	u.e.t.Helper()
	r := u.do("POST", "/mailboxes", body)
	u.want(r, 201, "")
	return r.data("mailbox")
}

// open creates and selects a mailbox.
func (u *user) open() map[string]any {
	u.e.t.Helper()
	m := u.create("{}")
	u.want(u.do("POST", "/mailboxes/"+m["id"].(string)+"/select", ""), 200, "")
	return m
}

// deliver stores a message as ingest does: with a delivery key, retried
// while Redis is unavailable (a failover), so a retry never stores twice.
func (e *env) deliver(addr, subject string) storage.Summary {
	e.t.Helper()
	m := storage.NewMessage{
		From: "Jörg <joerg@example.org>", Subject: subject, Status: storage.StatusReady,
		Text: "code " + subject, HTML: "<p>code <b>" + subject + "</b></p>",
		Key: storage.DeliveryKey([]byte(addr + "\n" + subject)),
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := e.store.Deliver(ctx, addr, m)
		cancel()
		if err == nil {
			return s
		}
		if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
			e.t.Fatalf("deliver: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverNow is the Redis server's clock, which every window follows.
func (e *env) serverNow() time.Time {
	e.t.Helper()
	ts, err := e.client.Do(context.Background(), e.client.B().Time().Build()).AsStrSlice()
	if err != nil {
		e.t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(ts[0], 10, 64)
	usec, _ := strconv.ParseInt(ts[1], 10, 64)
	return time.Unix(sec, usec*1000)
}

// awaitWindow sleeps until the server clock is early in a window of size d,
// so a test's burst cannot straddle two fixed windows.
func (e *env) awaitWindow(d, margin time.Duration) {
	now := e.serverNow()
	into := now.Sub(now.Truncate(d))
	if into+margin > d {
		time.Sleep(d - into + 50*time.Millisecond)
	}
}

// inOneWindow runs burst, which sends requests that the per-second request
// rate counts as the client ip, until a run starts and ends within one
// second of this process's clock: the node's, whose whole seconds are the
// windows. Each run starts with at least margin left in its second and has
// a fresh ip; a run that a slow moment stretched across two windows (which
// count it as two) is not the one the caller checks. At most 5 runs.
func (e *env) inOneWindow(margin time.Duration, burst func(ip string)) {
	e.t.Helper()
	for attempt := 1; ; attempt++ {
		e.awaitWindow(time.Second, margin)
		start := time.Now()
		burst(randomIP())
		if time.Now().Truncate(time.Second).Equal(start.Truncate(time.Second)) {
			return
		}
		if attempt == 5 {
			e.t.Fatalf("5 runs each spanned two seconds")
		}
		e.t.Logf("run %d spanned two seconds (%v from %v): again", attempt, time.Since(start), start.Format("15:04:05.000"))
	}
}

// redisServer is a throwaway standalone redis-server for fault tests, which
// stop, restart and pause it; the shared cluster is never disturbed.
type redisServer struct {
	*storagetest.Server
	t *testing.T
}

func startRedis(t *testing.T) *redisServer {
	return &redisServer{Server: storagetest.StartServer(t), t: t}
}

// awaitBlocked waits until a client's command is held by the server
// (INFO's blocked_clients, which counts one held by CLIENT PAUSE WRITE).
func (r *redisServer) awaitBlocked() {
	r.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for line := range strings.Lines(r.Redis("INFO", "clients")) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok && n != "0" {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatal("no command held by Redis after 5 s")
		}
	}
}

func (r *redisServer) client() rueidis.Client {
	r.t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr()}, DisableCache: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(c.Close)
	return c
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// shortLived creates, straight in storage, a mailbox living only lifetime (the
// API's minimum is a minute), and a user whose jar holds its scoped cookie
// and has selected it.
func (e *env) shortLived(lifetime time.Duration) (*user, storage.Mailbox) {
	e.t.Helper()
	m, scoped, err := e.store.Create(context.Background(), storage.NewTag(), "mayfly.test", lifetime, "o")
	if err != nil {
		e.t.Fatal(err)
	}
	u := e.newUser("")
	u.hc.Jar.SetCookies(mustURL(e.base), []*http.Cookie{{Name: "mayfly_" + strings.ReplaceAll(m.ID.String(), "-", ""), Value: scoped.String(), Path: "/v1"}})
	u.want(u.do("POST", "/mailboxes/"+m.ID.String()+"/select", ""), 200, "")
	return u, m
}

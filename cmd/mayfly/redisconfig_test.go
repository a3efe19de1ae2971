package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// syncBuffer is a log buffer a test reads while the node writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serverClient is a client of a storagetest.Server of the test's own.
func serverClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	client, err := rueidis.NewClient(storage.ClientOption([]string{addr}, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// The test cluster is started by deploy/cluster.sh, which applies
// deploy/lib.sh's redis_memory_args: a node starts, and finds nothing to
// warn about but maxmemory, which the scripts leave at 0 (no limit) on a
// development machine.
func TestRedisSettingsOfOurClusterPass(t *testing.T) {
	var logs syncBuffer
	c := newRedisChecker(storagetest.Client(t), false, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err := c.start(t.Context()); err != nil {
		t.Fatalf("start on the cluster deploy/cluster.sh started: %v", err)
	}
	for _, f := range c.check(t.Context()) {
		if !f.ok() && f.setting.name != "maxmemory" {
			t.Errorf("%s on %s = %q (err %v), want %s:\n%s", f.setting.name, f.node, f.have, f.err, f.setting.want, logs.String())
		}
	}
}

// A Redis with its own defaults gets one warning per setting that differs,
// naming the node, the setting and both values, and starts: none of them
// loses mail.
func TestRedisSettingsWarnWhenTheyDiffer(t *testing.T) {
	t.Parallel()
	srv := storagetest.StartServer(t)
	srv.Redis("CONFIG", "SET", "hash-max-listpack-entries", "48") // one as Mayfly wants it: no warning
	var logs syncBuffer
	c := newRedisChecker(serverClient(t, srv.Addr()), false, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err := c.start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	for _, want := range []string{
		`"setting":"hash-max-listpack-value","have":"64","want":"4096"`,
		`"setting":"stream-node-max-bytes","have":"4096","want":"256"`,
		`"msg":"redis has no memory limit (maxmemory 0)`,
		`"setting":"maxmemory","have":"0","want":"> 0"`,
		`"node":"` + srv.Addr() + `"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("warnings lack %s:\n%s", want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), `"level":"WARN"`); n != 3 {
		t.Errorf("%d warnings, want 3:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), `"setting":"hash-max-listpack-entries"`) {
		t.Errorf("warned about a setting that matches:\n%s", logs.String())
	}
}

// An evicting maxmemory-policy stops the node at start with the fix; with
// MAYFLY_REDIS_ALLOW_EVICTION=true it starts, warns, and its gauge says 0.
func TestNodeRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	srv := storagetest.StartServer(t)
	srv.Redis("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
	srv.Redis("CONFIG", "SET", "maxmemory", "100mb")
	env := map[string]string{"MAYFLY_REDIS_ADDRS": srv.Addr(), "MAYFLY_DRAIN_DELAY": "0s",
		"MAYFLY_HTTP_ADDR": "127.0.0.1:0", "MAYFLY_SMTP_ADDR": "127.0.0.1:0", "MAYFLY_ADMIN_ADDR": "127.0.0.1:0"}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs syncBuffer
	err := run(ctx, []string{"all"}, environ(env), io.Discard, &logs)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("run = %v, want a refusal", err)
	}
	for _, want := range []string{"redis " + srv.Addr() + " has maxmemory-policy volatile-lru",
		"maxmemory-policy noeviction", "MAYFLY_REDIS_ALLOW_EVICTION=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run error = %q, want %q", err, want)
		}
	}
	if strings.Contains(logs.String(), `"kind":"http"`) || strings.Contains(logs.String(), `"kind":"smtp"`) {
		t.Errorf("the node served on an evicting Redis:\n%s", logs.String())
	}

	env["MAYFLY_REDIS_ALLOW_EVICTION"] = "true"
	metrics := scrapeRunning(t, env)
	if want := `mayfly_redis_setting_ok{node="` + srv.Addr() + `",setting="maxmemory-policy"} 0`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "mayfly_redis_setting_ok"))
	}
	if want := `mayfly_redis_setting_ok{node="` + srv.Addr() + `",setting="redis_version"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "mayfly_redis_setting_ok"))
	}
}

// scrapeRunning starts `mayfly all` with env, reads its /metrics once it
// listens, and stops it.
func scrapeRunning(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"all"}, environ(env), io.Discard, logw)
		logw.CloseWithError(err)
		done <- err
	}()
	addrs := listeningAddrs(t, logs, "http", "smtp", "admin")
	resp, err := http.Get("http://" + addrs["admin"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	return string(raw)
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A Redis older than 7.0 stops the node: simulated by a proxy in front of
// a real Redis that answers INFO with another version.
func TestNodeRefusesAnOldRedis(t *testing.T) {
	t.Parallel()
	srv := storagetest.StartServer(t)
	proxy, old := versionProxy(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	env := map[string]string{"MAYFLY_REDIS_ADDRS": proxy, "MAYFLY_REDIS_ALLOW_EVICTION": "true", "MAYFLY_DRAIN_DELAY": "0s",
		"MAYFLY_HTTP_ADDR": "127.0.0.1:0", "MAYFLY_SMTP_ADDR": "127.0.0.1:0", "MAYFLY_ADMIN_ADDR": "127.0.0.1:0"}
	err := run(ctx, []string{"all"}, environ(env), io.Discard, io.Discard)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("run = %v, want a refusal", err)
	}
	if want := "redis " + proxy + " is version " + old + ": Mayfly needs Redis 7.0 or later"; !strings.Contains(err.Error(), want) {
		t.Errorf("run error = %q, want %q", err, want)
	}
}

// versionProxy forwards connections to addr, rewriting the major version in
// INFO's redis_version line to 6 (the length stays, so the RESP framing
// holds). It returns its address and the version it reports.
func versionProxy(t *testing.T, addr string) (string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	have := strings.TrimSpace(strings.TrimPrefix(grepLines(serverInfo(t, addr), "redis_version:"), "redis_version:"))
	old := "6" + have[1:]
	from, to := []byte("redis_version:"+have), []byte("redis_version:"+old)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						c.Write(bytes.ReplaceAll(buf[:n], from, to))
					}
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), old
}

func serverInfo(t *testing.T, addr string) string {
	t.Helper()
	c := serverClient(t, addr)
	info, err := c.Do(t.Context(), c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(info, "\r", "")
}

// The check runs again while the node serves: a policy changed to an
// evicting one is logged at error level and its gauge goes to 0, and back.
func TestRedisSettingsCheckedWhileRunning(t *testing.T) {
	t.Parallel()
	srv := storagetest.StartServer(t)
	srv.Redis("CONFIG", "SET", "maxmemory", "100mb")
	var logs syncBuffer
	c := newRedisChecker(serverClient(t, srv.Addr()), false, slog.New(slog.NewJSONHandler(&logs, nil)))
	c.interval, c.nodesEvery = 100*time.Millisecond, 20*time.Millisecond
	if err := c.start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.run(ctx)
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "setting" && l.GetValue() == "maxmemory-policy" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	waitGauge := func(want float64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); gauge() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("mayfly_redis_setting_ok{setting=maxmemory-policy} = %v after 5s, want %v:\n%s", gauge(), want, logs.String())
			}
		}
	}
	waitGauge(1)
	srv.Redis("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
	waitGauge(0)
	if want := `"level":"ERROR","msg":"redis setting loses acknowledged mail: redis ` + srv.Addr() + ` has maxmemory-policy allkeys-lru`; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, logs.String())
	}
	srv.Redis("CONFIG", "SET", "maxmemory-policy", "noeviction")
	waitGauge(1)
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
		t.Errorf("%d error lines, want 1 (a setting is logged when it changes):\n%s", n, logs.String())
	}
	// A Redis node that is down is logged, and keeps its last reading: it
	// does not read as one that evicts.
	srv.Kill()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), `"msg":"cannot read a redis setting`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning 5s after the Redis node died:\n%s", logs.String())
		}
	}
	time.Sleep(300 * time.Millisecond) // a few more checks
	if got := gauge(); got != 1 {
		t.Errorf("mayfly_redis_setting_ok{setting=maxmemory-policy} = %v with the node down, want its last reading 1", got)
	}
}

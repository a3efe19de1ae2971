package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		ping      error
		path      string
		wantCode  int
		wantInAns string
	}{
		{"alive", nil, "/healthz", 200, "ok"},
		{"alive without redis", errors.New("down"), "/healthz", 200, "ok"},
		{"ready", nil, "/readyz", 200, "ok"},
		{"not ready without redis", errors.New("down"), "/readyz", 503, "redis unavailable"},
		{"metrics", nil, "/metrics", 200, "go_goroutines"},
		{"pprof", nil, "/debug/pprof/", 200, "goroutine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector())
			srv := httptest.NewServer(adminMux(reg, func(context.Context) error { return tt.ping }, true))
			defer srv.Close()
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(body), tt.wantInAns) {
				t.Errorf("GET %s = %d %.80q, want %d containing %q", tt.path, resp.StatusCode, body, tt.wantCode, tt.wantInAns)
			}
		})
	}
}

// pprof is off unless asked for or on loopback: the image's admin listener
// is 0.0.0.0:9090, reachable by whatever reaches the pod, and a CPU profile
// or trace costs the node CPU for as long as the caller asks.
func TestAdminPprofPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode, addr string
		want       bool
	}{
		{"auto", "127.0.0.1:9090", true},
		{"auto", "[::1]:9090", true},
		{"auto", "0.0.0.0:9090", false},
		{"auto", "[::]:9090", false},
		{"auto", "10.1.2.3:9090", false},
		{"off", "127.0.0.1:9090", false},
		{"on", "0.0.0.0:9090", true},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := pprofEnabled(tt.mode, addr); got != tt.want {
			t.Errorf("pprofEnabled(%s, %s) = %v, want %v", tt.mode, tt.addr, got, tt.want)
		}
	}
	// Off means absent: 404, while the rest of the admin endpoints serve.
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(adminMux(reg, func(context.Context) error { return nil }, false))
	defer srv.Close()
	for path, want := range map[string]int{"/debug/pprof/": 404, "/debug/pprof/profile?seconds=1": 404, "/debug/pprof/trace": 404, "/metrics": 200, "/readyz": 200} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s with pprof off = %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// The node wires the policy: its admin listener on loopback (as every test
// node's) serves pprof under auto and not under off.
func TestAdminPprofSetting(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]int{"auto": 200, "off": 404} {
		cfg, err := loadConfig(func(k string) string {
			if k == "MAYFLY_ADMIN_PPROF" {
				return mode
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(adminMux(prometheus.NewRegistry(), func(context.Context) error { return nil },
			pprofEnabled(cfg.adminPprof, ln.Addr())))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		resp, err := http.Get(srv.URL + "/debug/pprof/")
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("MAYFLY_ADMIN_PPROF=%s on loopback: GET /debug/pprof/ = %d, want %d", mode, resp.StatusCode, want)
		}
	}
	if _, err := loadConfig(func(k string) string {
		if k == "MAYFLY_ADMIN_PPROF" {
			return "yes"
		}
		return ""
	}); err == nil || !strings.Contains(err.Error(), "MAYFLY_ADMIN_PPROF") {
		t.Errorf("MAYFLY_ADMIN_PPROF=yes: err %v, want a config error naming it", err)
	}
}

// TestWrongPortHints: a client pointed at the wrong place of `mayfly all`
// learns where the API is. The admin port answers any other path with a
// JSON 404 ADMIN_ROUTE_NOT_FOUND naming the API's URL; the API port
// answers a path outside /v1 with 404 ROUTE_NOT_FOUND naming /v1. An ingest
// node's admin port says it serves no API.
func TestWrongPortHints(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	admin := "http://" + s.env["MAYFLY_ADMIN_ADDR"]
	getJSON := func(url string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error map[string]any }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET %s: %d, body not JSON: %v", url, resp.StatusCode, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", url, ct)
		}
		return resp.StatusCode, body.Error
	}
	for _, path := range []string{"/v1/mailboxes/current", "/", "/mailboxes"} {
		status, e := getJSON(admin + path)
		msg, _ := e["message"].(string)
		if status != 404 || e["code"] != "ADMIN_ROUTE_NOT_FOUND" || !strings.Contains(msg, "admin port") || !strings.Contains(msg, s.api) {
			t.Errorf("admin GET %s = %d %v, want 404 ADMIN_ROUTE_NOT_FOUND naming the admin port and %s", path, status, e, s.api)
		}
	}
	if resp, err := http.Get(admin + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("admin GET /healthz: %v %v", resp, err)
	}
	root := strings.TrimSuffix(s.api, "/v1")
	status, e := getJSON(root + "/mailboxes/current")
	if msg, _ := e["message"].(string); status != 404 || e["code"] != "ROUTE_NOT_FOUND" || !strings.Contains(msg, "try /v1/mailboxes/current") {
		t.Errorf("API GET /mailboxes/current = %d %v, want 404 ROUTE_NOT_FOUND with the /v1 hint", status, e)
	}

	mux := http.NewServeMux()
	handleAdminNotFound(mux, "")
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if status, e := getJSON(srv.URL + "/v1/messages"); status != 404 || !strings.Contains(e["message"].(string), "serves no API") {
		t.Errorf("ingest admin GET /v1/messages = %d %v, want 404 saying the node serves no API", status, e)
	}
}

// TestBuildInfoOnEveryNode: edge, ingest and all export
// mayfly_build_info{version,revision,layout} 1, the layout the one their
// store writes: MAYFLY_STORAGE_WRITE_LAYOUT's, or on a fresh cluster (a
// fresh key prefix) the current one.
func TestBuildInfoOnEveryNode(t *testing.T) {
	t.Parallel()
	b := readBuild()
	for _, tt := range []struct {
		kind, setting, layout string
		listeners             []string
	}{
		{"edge", "", storage.LayoutCurrent, []string{"admin", "http"}},
		{"ingest", storage.Layout20261124, storage.Layout20261124, []string{"admin", "smtp"}},
		{"all", storage.Layout20261125, storage.Layout20261125, []string{"admin", "http", "smtp"}},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			env := testEnv(t, map[string]string{
				"MAYFLY_REDIS_PREFIX":         storagetest.Prefix(t),
				"MAYFLY_HTTP_ADDR":            "127.0.0.1:0",
				"MAYFLY_SMTP_ADDR":            "127.0.0.1:0",
				"MAYFLY_ADMIN_ADDR":           "127.0.0.1:0",
				"MAYFLY_DOMAINS":              "mayfly.test",
				"MAYFLY_STORAGE_WRITE_LAYOUT": tt.setting,
			})
			ctx, cancel := context.WithCancel(context.Background())
			logs, logw := io.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				logw.CloseWithError(run(ctx, []string{tt.kind}, func(k string) string { return env[k] }, io.Discard, logw))
			}()
			t.Cleanup(func() { cancel(); <-done })
			// The store and its metrics are there before the node logs its
			// HTTP or SMTP listener.
			addrs := listeningAddrs(t, logs, tt.listeners...)
			metrics := get(t, http.DefaultClient, "http://"+addrs["admin"]+"/metrics")
			got := regexp.MustCompile(`(?m)^mayfly_build_info.*$`).FindAllString(metrics, -1)
			want := `mayfly_build_info{layout="` + tt.layout + `",revision="` + b.revision + `",version="` + b.version + `"} 1`
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s with MAYFLY_STORAGE_WRITE_LAYOUT=%q: /metrics %q, want one %s", tt.kind, tt.setting, got, want)
			}
		})
	}
}

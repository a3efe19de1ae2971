package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
			srv := httptest.NewServer(adminMux(reg, func(context.Context) error { return tt.ping }))
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

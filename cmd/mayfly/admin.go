package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
)

// reachable is /readyz's test: nil when any Redis node answers PING. A node
// is ready while it reaches the cluster: one failed Redis node (whose slots
// fail over within seconds) must not take every Mayfly node out of its load
// balancer at once, which a PING to one random node would.
func reachable(ctx context.Context, client rueidis.Client) error {
	nodes := client.Nodes()
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- n.Do(ctx, n.B().Ping().Build()).Error() }()
	}
	err := errors.New("no redis node known")
	for range nodes {
		if err = <-errs; err == nil {
			return nil
		}
	}
	return err
}

// errDraining is /readyz's answer from a node's stop signal on: it still
// serves for MAYFLY_DRAIN_DELAY, and wants no new work.
var errDraining = errors.New("mayfly: draining")

// pprofEnabled decides MAYFLY_ADMIN_PPROF for an admin listener bound to
// addr: "on" and "off" are what they say; "auto" serves the profiles only
// when the listener is on loopback, where only the machine's own users reach
// them. A CPU profile or trace costs the node real CPU for as long as the
// caller asks, and a listener on 0.0.0.0 (a container's, for the kubelet's
// probes and Prometheus) is reachable by whatever reaches the pod.
func pprofEnabled(mode string, addr net.Addr) bool {
	switch mode {
	case "on":
		return true
	case "off":
		return false
	}
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// registerWriteStats exports storage's counts of durable writes as
// mayfly_durable_writes_total{outcome}: the drills compare the 250s they
// counted with the writes acknowledged after a WAIT on the node that stored
// them (acked_waited).
func registerWriteStats(reg prometheus.Registerer, store *storage.Store) {
	for outcome, get := range map[string]func(storage.WriteStats) int64{
		"acked_waited":  func(w storage.WriteStats) int64 { return w.AckedWaited },
		"acked_no_wait": func(w storage.WriteStats) int64 { return w.AckedNoWait },
		"refused":       func(w storage.WriteStats) int64 { return w.Refused },
		"redirected":    func(w storage.WriteStats) int64 { return w.Redirected },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mayfly_durable_writes_total",
			Help:        "Creations and deliveries by outcome: acked_waited (a replica acknowledged, WAIT on the storing node), acked_no_wait (no replica required), refused (451/503: too few replicas in time), redirected (MOVED/ASK, sent again to the node named).",
			ConstLabels: prometheus.Labels{"outcome": outcome},
		}, func() float64 { return float64(get(store.WriteStats())) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mayfly_durable_batches_total",
		Help: "Group commits sent: the scripts of the writes to one primary that arrived while its previous batch was in flight, one WAIT, CLUSTER MYID (acked_waited / this is the mean batch).",
	}, func() float64 { return float64(store.WriteStats().Batches) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mayfly_durable_view_refresh_failures_total",
		Help: "Failed reads of the replica view (CLUSTER INFO, CLUSTER NODES) that decides how many replicas a creation or delivery waits for; while it cannot be read, a write it would let through without WAIT is refused (451/503).",
	}, func() float64 { return float64(store.WriteStats().ViewRefreshFailures) }))
}

// registerBuildInfo exports mayfly_build_info{version,revision,layout} 1:
// which build a node runs and the storage layout it writes, so that a
// rollout's mix of versions and layouts is one query
// (count by (version, layout) (mayfly_build_info)). The layout is read at
// every scrape, from the store itself: the label says what the node writes,
// not what its binary would by default.
func registerBuildInfo(reg prometheus.Registerer, b build, layout func() string) {
	reg.MustRegister(buildInfo{
		desc: prometheus.NewDesc("mayfly_build_info",
			"1 for the build this node runs: version (its release tag, or git describe past one), revision (the commit) and layout (the storage layout it writes).",
			[]string{"version", "revision", "layout"}, nil),
		build: b, layout: layout,
	})
}

// buildInfo is the collector of mayfly_build_info.
type buildInfo struct {
	desc   *prometheus.Desc
	build  build
	layout func() string
}

func (c buildInfo) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c buildInfo) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, c.build.version, c.build.revision, c.layout())
}

// adminMux serves the operator endpoints. It is mounted on MAYFLY_ADMIN_ADDR
// only, never on the public listener; /debug/pprof/ only when withPprof.
func adminMux(reg *prometheus.Registry, ping func(context.Context) error, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := ping(ctx); err != nil {
			msg := "redis unavailable"
			if errors.Is(err, errDraining) {
				msg = "draining"
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if !withPprof {
		return mux
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// handleAdminNotFound answers every path of the admin listener that is not
// an operator endpoint with a JSON 404 in the API's error envelope, code
// ADMIN_ROUTE_NOT_FOUND, saying that this is the admin port and where the
// API is: api is the node's API base URL, "" on an ingest node (which
// serves none). A client pointed at the admin port then says so, instead of
// "404 Not Found".
func handleAdminNotFound(mux *http.ServeMux, api string) {
	where := "This node serves no API (ingest only): the API is on an edge node's HTTP port (MAYFLY_HTTP_ADDR), under /v1."
	details := map[string]string{"api_prefix": "/v1"}
	if api != "" {
		where = "The API is on the HTTP port (MAYFLY_HTTP_ADDR), under /v1: " + api
		details["api"] = api
	}
	var body struct {
		Error struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Details map[string]string `json:"details"`
		} `json:"error"`
	}
	body.Error.Code = "ADMIN_ROUTE_NOT_FOUND"
	body.Error.Message = "This is Mayfly's admin port (MAYFLY_ADMIN_ADDR: /healthz, /readyz, /metrics), not the API. " + where
	body.Error.Details = details
	answer, _ := json.Marshal(body)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		w.Write(answer)
	})
}

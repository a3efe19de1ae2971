package edge

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the edge's Prometheus series.
type Metrics struct {
	requests      *prometheus.CounterVec   // by route and status
	latency       *prometheus.HistogramVec // by route
	redisErrors   prometheus.Counter
	rejections    *prometheus.CounterVec // rate-limit rejections by kind
	accessDropped prometheus.Counter     // access-log lines over AccessLogRate
	// event streams ended because another Redis node answers for their mailbox
	streamNodeChanged prometheus.Counter
	// event streams ended because a write to the client timed out
	streamWriteTimeouts prometheus.Counter
	reg                 prometheus.Registerer // for the series New adds (nil: none)
}

// NewMetrics registers the edge's series on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mayfly_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_http_redis_errors_total", Help: "Requests that failed because Redis was unavailable.",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_ratelimit_rejections_total", Help: "Requests refused by a limit, by kind.",
		}, []string{"kind"}),
		accessDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_http_access_log_dropped_total", Help: "Access-log lines dropped over MAYFLY_ACCESS_LOG_RATE.",
		}),
		streamNodeChanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_events_streams_node_changed_total",
			Help: "Event streams ended because another Redis node now answers for their mailbox (a failover or a slot migration); each client reconnects and lists.",
		}),
		streamWriteTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_events_write_timeouts_total",
			Help: "Event streams ended because one write to the client (an event, the replay, a heartbeat, a catch-up) took longer than the write timeout: a client that stopped reading.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.redisErrors, m.rejections, m.accessDropped, m.streamNodeChanged,
			m.streamWriteTimeouts)
	}
	m.reg = reg
	return m
}

// registerStreams adds the event-stream gauges of server s: how many are
// open and the node's cap (MaxStreams), so an alert can compare the two.
func (m *Metrics) registerStreams(s *Server) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mayfly_events_streams_open", Help: "Open event streams (GET /events) on this node.",
		}, func() float64 { return float64(s.streams.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mayfly_events_streams_max", Help: "The node's cap on open event streams (MAYFLY_MAX_STREAMS).",
		}, func() float64 { return float64(s.cfg.MaxStreams) }),
	)
}

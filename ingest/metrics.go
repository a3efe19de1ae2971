package ingest

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the SMTP server's Prometheus series. Reason labels are the
// reason column of the reply table (reply.go), so they are a fixed set.
type Metrics struct {
	sessions    prometheus.Gauge
	lingering   prometheus.Gauge         // refused connections draining before close (maxLingering)
	buffered    prometheus.Gauge         // message bytes reserved by transfers in progress
	messages    *prometheus.CounterVec   // one per DATA: "accepted" or the refusal reason
	rejections  *prometheus.CounterVec   // refusals before DATA (connect, MAIL, RCPT) by reason
	stored      *prometheus.CounterVec   // per recipient delivery, by message status
	failed      *prometheus.CounterVec   // messages accepted with status failed, by reason (failReasons)
	latency     prometheus.Histogram     // end of DATA until the reply: parse plus deliveries
	stage       *prometheus.HistogramVec // parse and deliver separately
	redisErrors prometheus.Counter
	tlsSessions *prometheus.CounterVec // STARTTLS handshakes completed, by TLS version
	tlsFailures prometheus.Counter     // STARTTLS handshakes failed
	reg         prometheus.Registerer  // for the series New adds (nil: none)
	logDropped  prometheus.Counter     // lines about clients over Config.LogRate
}

// NewMetrics registers the ingest series on reg (nil: unregistered, for
// tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mayfly_smtp_sessions_open", Help: "SMTP connections admitted and not yet closed.",
		}),
		lingering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mayfly_smtp_refused_lingering", Help: "Connections refused before their session (421) that are being drained before close; at most 64 per node, the rest close at once.",
		}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mayfly_smtp_buffered_bytes", Help: "Message bytes reserved from MAYFLY_SMTP_BUFFER_BYTES by the transfers (DATA) in progress.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_smtp_messages_total", Help: "Messages (DATA commands) by result: accepted, or the reason they were refused.",
		}, []string{"result"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_smtp_rejections_total", Help: "Connections, senders and recipients refused before DATA, by reason.",
		}, []string{"reason"}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_smtp_deliveries_total", Help: "Messages stored in a mailbox (one per recipient), by message status.",
		}, []string{"status"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_smtp_failed_messages_total", Help: "Messages accepted and stored with status failed (one per DATA, whatever the recipients), by why the parser gave up.",
		}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mayfly_smtp_delivery_duration_seconds", Help: "From the end of DATA to the reply: parse plus every recipient's delivery.",
			Buckets: buckets,
		}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mayfly_smtp_stage_duration_seconds", Help: "Time of one stage of a delivery: parse (MIME and HTML) or store (all recipients).",
			Buckets: buckets,
		}, []string{"stage"}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_smtp_redis_errors_total", Help: "Redis calls of the SMTP server that failed (storage and rate limits).",
		}),
		tlsSessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mayfly_smtp_tls_sessions_total", Help: "SMTP connections that completed STARTTLS, by TLS version (1.2, 1.3).",
		}, []string{"version"}),
		tlsFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_smtp_tls_handshake_failures_total", Help: "STARTTLS handshakes that failed (a client below the TLS 1.2 floor, no common cipher, a client that does not trust the certificate, garbage); the client got 550.",
		}),
		logDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mayfly_smtp_log_dropped_total", Help: "SMTP log lines about clients (connections refused, messages accepted, refused or stored as failed, Redis errors) not written: over MAYFLY_SMTP_LOG_RATE in their second.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.sessions, m.lingering, m.buffered, m.messages, m.rejections, m.stored, m.failed, m.latency, m.stage, m.redisErrors, m.tlsSessions, m.tlsFailures, m.logDropped)
	}
	m.reg = reg
	return m
}

// tlsHandshake counts the outcome of one STARTTLS handshake
// (smtp.Server.TLSHandshake).
func (m *Metrics) tlsHandshake(state tls.ConnectionState, err error) {
	if err != nil {
		m.tlsFailures.Inc()
		return
	}
	m.tlsSessions.WithLabelValues(tlsVersion(state.Version)).Inc()
}

// tlsVersion is the version label of a TLS version: "1.2", "1.3", or
// "other" (the floor keeps anything else out).
func tlsVersion(v uint16) string {
	switch v {
	case tls.VersionTLS12:
		return "1.2"
	case tls.VersionTLS13:
		return "1.3"
	}
	return "other"
}

// registerCaps adds the caps of server s beside the gauges they bound
// (mayfly_smtp_sessions_open, mayfly_smtp_buffered_bytes), so that an alert
// on a node near its cap is one division whatever the node's settings.
func (m *Metrics) registerCaps(s *Server) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mayfly_smtp_sessions_max", Help: "The node's cap on SMTP sessions (MAYFLY_SMTP_MAX_SESSIONS); past it a connection gets 421 4.4.5.",
		}, func() float64 { return float64(s.cfg.MaxSessions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mayfly_smtp_buffer_bytes_max", Help: "The node's cap on message bytes held by transfers in progress (MAYFLY_SMTP_BUFFER_BYTES); a DATA that finds no room gets 451 4.3.1.",
		}, func() float64 { return float64(s.cfg.MaxBufferBytes) }),
	)
}

package main

import (
	"log/slog"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
)

// clamp is a setting a node does not use as configured: a package's
// withDefaults raised or lowered it to stay consistent with another one.
type clamp struct {
	setting             string
	configured, applied int64
	why                 string
}

// logClamps warns once per setting whose applied value differs from the
// configured one, with both: a clamp is the node's decision, not the
// operator's, and must not pass in silence.
func logClamps(log *slog.Logger, cs []clamp) {
	for _, c := range cs {
		if c.configured != c.applied {
			log.Warn("setting clamped", "setting", c.setting, "configured", c.configured, "applied", c.applied, "why", c.why)
		}
	}
}

// limiterClamps compares the rate-limit settings with what the limiter
// applies (ratelimit.Config.withDefaults).
func limiterClamps(cfg config, applied ratelimit.Config) []clamp {
	return []clamp{
		{"MAYFLY_RATE_NET_CREATE_PER_MINUTE", int64(cfg.netPerMinute), int64(applied.NetCreatePerMinute), "never below MAYFLY_RATE_CREATE_PER_MINUTE: a network holds at least one client"},
		{"MAYFLY_RATE_NET_CREATE_PER_HOUR", int64(cfg.netPerHour), int64(applied.NetCreatePerHour), "never below MAYFLY_RATE_CREATE_PER_HOUR: a network holds at least one client"},
		{"MAYFLY_RATE_NET_CREATE_PER_DAY", int64(cfg.netPerDay), int64(applied.NetCreatePerDay), "never below MAYFLY_RATE_CREATE_PER_DAY: a network holds at least one client"},
		{"MAYFLY_RATE_NET_ACTIVE", int64(cfg.netActive), int64(applied.NetActive), "never below MAYFLY_RATE_ACTIVE_PER_IP: a network holds at least one client"},
	}
}

// edgeClamps compares the edge's settings with what run gives it.
func edgeClamps(cfg config, applied edge.Config) []clamp {
	return []clamp{
		{"MAYFLY_HTTP_MAX_CONNS", int64(cfg.maxConns), int64(applied.MaxConns), "kept below 90% of the file-descriptor limit (the log line \"file descriptor limit\")"},
	}
}

// ingestClamps compares the SMTP settings with what the server applies
// (ingest.Config.withDefaults).
func ingestClamps(cfg config, applied ingest.Config) []clamp {
	return []clamp{
		{"MAYFLY_SMTP_BUFFER_BYTES", int64(cfg.smtp.bufferBytes), applied.MaxBufferBytes, "never below MAYFLY_SMTP_MAX_BYTES: the largest message must fit"},
		{"MAYFLY_SMTP_BUFFER_BYTES_PER_IP", int64(cfg.smtp.bufferPerIP), applied.MaxBufferBytesPerIP, "never below MAYFLY_SMTP_MAX_BYTES nor above MAYFLY_SMTP_BUFFER_BYTES"},
	}
}

package ingest

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
)

// LogClientIP says how the SMTP log names a client.
type LogClientIP string

const (
	LogClientIPFull      LogClientIP = "full"      // its key as the per-IP limits count it: the IPv4 address, the IPv6 /64 (the default)
	LogClientIPTruncated LogClientIP = "truncated" // its network: IPv4 /24, IPv6 /48
	LogClientIPOff       LogClientIP = "off"       // no ip key at all
)

// logCap bounds the lines a node writes about clients to perSecond in each
// second: a client that opens connections or sends messages as fast as it
// can must not turn into as many log lines. The access log's rule (edge).
type logCap struct {
	perSecond int64
	window    atomic.Int64 // the current second (Unix)
	count     atomic.Int64 // lines written in it
}

func (c *logCap) allow(now time.Time) bool {
	if sec := now.Unix(); c.window.Load() != sec {
		// A racing reset may let a few lines more through; the bound holds
		// within that slack.
		c.window.Store(sec)
		c.count.Store(0)
	}
	return c.count.Add(1) <= c.perSecond
}

// logClient writes one line about a client (a connection, transaction or
// message of it) if the level is enabled and the cap allows; a line over
// the cap is counted in mayfly_smtp_log_dropped_total. client is the
// client's key (ratelimit.ClientKey), logged as Config.LogClientIP says.
func (s *Server) logClient(level slog.Level, msg, client string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	if !s.logCap.allow(time.Now()) {
		s.metrics.logDropped.Inc()
		return
	}
	if ip := clientIPAttr(s.cfg.LogClientIP, client); ip.Key != "" {
		attrs = append([]slog.Attr{ip}, attrs...)
	}
	s.log.LogAttrs(ctx, level, msg, attrs...)
}

// clientIPAttr is the ip attribute of client (an address or an IPv6 /64)
// under mode; the zero Attr when mode is off.
func clientIPAttr(mode LogClientIP, client string) slog.Attr {
	switch mode {
	case LogClientIPOff:
		return slog.Attr{}
	case LogClientIPTruncated:
		addr, err := netip.ParseAddr(client)
		if err != nil {
			p, perr := netip.ParsePrefix(client)
			if perr != nil {
				return slog.String("ip", "unknown")
			}
			addr = p.Addr()
		}
		return slog.String("ip", ratelimit.NetworkPrefix(addr).String())
	}
	return slog.String("ip", client)
}

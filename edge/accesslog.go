package edge

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
	"github.com/valyala/fasthttp"
)

// AccessLog says which requests the access log records.
type AccessLog string

const (
	AccessLogOff    AccessLog = "off"    // none
	AccessLogErrors AccessLog = "errors" // answers with a status of 400 or more (the default)
	AccessLogAll    AccessLog = "all"    // every answer
)

// LogClientIP says how the access log names a client.
type LogClientIP string

const (
	LogClientIPFull      LogClientIP = "full"      // its address (the default)
	LogClientIPTruncated LogClientIP = "truncated" // its network: IPv4 /24, IPv6 /48
	LogClientIPOff       LogClientIP = "off"       // no ip key at all
)

// accessLog writes one line per answered request: what a client's
// request_id (from an error body or X-Request-ID) is looked up by. The
// route is the pattern ("GET /messages/{id}"), never the raw path, so no
// mailbox or message id is logged; no header is logged, so neither a cookie
// nor a Set-Cookie value can be. Lines past perSecond in one second are
// dropped and counted: a flood of refusals must not become a flood of log.
type accessLog struct {
	mode      AccessLog
	ip        LogClientIP
	log       *slog.Logger
	perSecond int64
	window    atomic.Int64 // the current second (Unix)
	count     atomic.Int64 // lines written in it
	dropped   func()
}

// record logs the answer to ctx if the mode and the rate allow; the client
// IP is read as the rate limits read it (trusted: MAYFLY_TRUSTED_PROXIES).
func (a *accessLog) record(ctx *fasthttp.RequestCtx, route string, start time.Time, trusted []netip.Prefix) {
	status := ctx.Response.StatusCode()
	if a.mode == AccessLogOff || a.mode == AccessLogErrors && status < 400 {
		return
	}
	now := time.Now()
	if sec := now.Unix(); a.window.Load() != sec {
		// A racing reset may let a few lines more through; the bound holds
		// within that slack.
		a.window.Store(sec)
		a.count.Store(0)
	}
	if a.count.Add(1) > a.perSecond {
		a.dropped()
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", requestID(ctx)),
		slog.String("route", route),
		slog.String("method", string(ctx.Method())),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(now.Sub(start).Microseconds())/1000),
	}
	switch ip := clientIP(ctx, trusted); a.ip {
	case LogClientIPOff:
	case LogClientIPTruncated:
		attrs = append(attrs, slog.String("ip", ratelimit.NetworkPrefix(ip).String()))
	default:
		attrs = append(attrs, slog.String("ip", ip.String()))
	}
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

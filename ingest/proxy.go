package ingest

import (
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/pires/go-proxyproto"
)

// proxyHeaderTimeout bounds how long a trusted proxy's connection may take
// to send its PROXY header.
const proxyHeaderTimeout = 5 * time.Second

// proxyPolicy requires a PROXY header from the trusted proxies and reads
// none from anyone else.
func (s *Server) proxyPolicy(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
	if ap, err := netip.ParseAddrPort(o.Upstream.String()); err == nil {
		ip := ap.Addr().Unmap()
		for _, p := range s.cfg.ProxyProtocolFrom {
			if p.Contains(ip) {
				return proxyproto.REQUIRE, nil
			}
		}
	}
	return proxyproto.SKIP, nil
}

// proxyHeaderOK reports whether nc may go on to admission: a connection
// from a trusted proxy must carry a usable PROXY header (a LOCAL one is a
// health check), any other connection carries none. It reads the header
// (bounded by proxyHeaderTimeout) here, in the connection's own goroutine,
// never in the accept loop.
func (s *Server) proxyHeaderOK(nc net.Conn) bool {
	pc, ok := nc.(*proxyproto.Conn)
	if !ok {
		return true
	}
	if h := pc.ProxyHeader(); h == nil || h.Command.IsLocal() || h.SourceAddr == nil {
		s.metrics.rejections.WithLabelValues("proxy_header").Inc()
		s.logClient(slog.LevelDebug, "smtp connection without a usable PROXY header from a trusted proxy", clientKey(pc.Raw().RemoteAddr()))
		return false
	}
	return true
}

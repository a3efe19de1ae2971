// Package load holds what Mayfly's load tools share: the client addresses
// they spread load over, an API client that opens inboxes, an SMTP sender,
// an event-stream reader and latency statistics.
package load

import (
	"fmt"
	"net"
	"net/netip"
)

// ClientIP returns the i-th address of 198.18.0.0/15, the range RFC 2544
// sets aside for benchmarks. The tools put it in X-Forwarded-For only, so the
// edge (trusting 127.0.0.1) rate-limits each as a separate client; nothing is
// ever sent to these addresses. base offsets the range, so that separate runs
// of one stack use fresh clients. Consecutive clients are in different /24s
// (the third octet changes first): a /24 is a network whose creations the
// edge shares out (MAYFLY_RATE_NET_*), as a public service's clients spread
// over many networks; 256 consecutive ones from one /24 met that share.
func ClientIP(base, i int) string {
	n := uint32(base+i) % (1 << 17)
	return fmt.Sprintf("198.%d.%d.%d", 18+n>>16, n&0xff, n>>8&0xff)
}

// SourcePool hands out loopback source addresses for SMTP connections, from
// 127.1.0.1 up, so that the per-IP SMTP limits of ingest see many clients
// while every packet stays on the loopback interface.
type SourcePool struct {
	prefix netip.Prefix
	size   uint32
	skip   uint32
}

// NewSourcePool parses a loopback CIDR such as 127.1.0.0/16. An empty string
// gives a pool that does not bind (the kernel picks 127.0.0.1).
func NewSourcePool(cidr string) (*SourcePool, error) {
	if cidr == "" {
		return &SourcePool{}, nil
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, err
	}
	if !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() > 30 {
		return nil, fmt.Errorf("source pool %s: want an IPv4 loopback prefix of /30 or wider", cidr)
	}
	return &SourcePool{prefix: p.Masked(), size: 1<<(32-p.Bits()) - 2}, nil
}

// Addr returns the i-th source address (cycling), or nil for an unbound pool.
func (p *SourcePool) Addr(i int) *net.TCPAddr {
	if p.size == 0 {
		return nil
	}
	b := p.prefix.Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n += 1 + (p.skip+uint32(i))%p.size
	return &net.TCPAddr{IP: net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n))}
}

// Offset returns a pool that starts n addresses further on.
func (p *SourcePool) Offset(n int) *SourcePool {
	q := *p
	q.skip += uint32(n)
	return &q
}

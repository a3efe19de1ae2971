package edge

import (
	"bytes"
	"net/netip"

	"github.com/valyala/fasthttp"
)

// clientIP is the address the rate limits apply to: the peer, unless the peer
// is a trusted proxy; then X-Forwarded-For is read right to left, skipping
// trusted hops, and the first untrusted hop is the client. A hop that does
// not parse ends the walk at the last trusted address, so a forged header
// never buys a fresh identity.
func clientIP(ctx *fasthttp.RequestCtx, trusted []netip.Prefix) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !isTrusted(peer, trusted) {
		return peer
	}
	client := peer
	values := ctx.Request.Header.PeekAll("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := values[i]
		for len(hops) > 0 {
			var hop []byte
			if j := bytes.LastIndexByte(hops, ','); j >= 0 {
				hop, hops = hops[j+1:], hops[:j]
			} else {
				hop, hops = hops, nil
			}
			a, err := netip.ParseAddr(string(bytes.TrimSpace(hop)))
			if err != nil {
				return client
			}
			client = a.Unmap()
			if !isTrusted(client, trusted) {
				return client
			}
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

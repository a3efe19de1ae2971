package edge

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// rateHint is what this node saw of each client's requests in the current
// second, so that the request count and a read's own Redis call can go out
// together while the client is well under its limit (wrap, issue 35).
// It decides nothing: the count in Redis admits or refuses every request.
// It only bounds the reads a refused request costs before its refusal is
// known: a client this node has seen more than half its limit of requests
// from this second, or seen refused, waits for its count first.
//
// One 8-byte slot per hash bucket of clients (512 KiB a node). Clients that
// share a bucket add up, which only sends them the sequential way sooner.
type rateHint struct {
	seed  maphash.Seed
	slots [1 << 16]atomic.Uint64 // second (low 32 bits) << 32 | requests seen
}

// refusedMark is a bucket's count once a client in it was refused this
// second: past every limit.
const refusedMark = 1 << 31

func newRateHint() *rateHint { return &rateHint{seed: maphash.MakeSeed()} }

func (h *rateHint) slot(client string) *atomic.Uint64 {
	return &h.slots[maphash.String(h.seed, client)&(1<<16-1)]
}

// take counts one request of client at now and reports whether the client
// is at most at half of limit requests this second on this node.
func (h *rateHint) take(client string, now time.Time, limit int) bool {
	s, sec := h.slot(client), uint64(uint32(now.Unix()))
	for {
		old := s.Load()
		n := old & (1<<32 - 1)
		if old>>32 != sec {
			n = 0
		}
		if n >= refusedMark {
			return false
		}
		if s.CompareAndSwap(old, sec<<32|(n+1)) {
			return 2*(n+1) <= uint64(limit)
		}
	}
}

// refused marks client refused for the rest of the second of now.
func (h *rateHint) refused(client string, now time.Time) {
	h.slot(client).Store(uint64(uint32(now.Unix()))<<32 | refusedMark)
}

package edge

import (
	"context"
	"sync"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// beatSlotEvery is the finest spacing of a node's heartbeat slots: a 20 s
// heartbeat has 100 slots, 200 ms apart. A tick costs the node far more
// than the streams it serves make it: the wheel, a beat worker, the
// batch's round trip through each Redis node and the stream workers each
// wake a thread, and after a burst of writes (syscalls it retakes a P
// from) the runtime's sysmon wakes every 20 µs for at least 1 ms. Ticks
// 50 ms apart (25 streams a tick at 10,000) were most of an idle node's
// CPU (issue 39, bench/HISTORY.md "Round seven").
const (
	beatSlotEvery = 200 * time.Millisecond
	beatMaxSlots  = 100
)

// beats is a node's heartbeat wheel: one goroutine and one ticker for all
// of its event streams, where each stream had a ticker of its own (which
// fired in waves: a stream's ticker started when it opened). The heartbeat
// period is cut into slots; each stream has one, and the wheel visits a
// slot per tick. The streams of a slot get their catch-up reads
// (stream_read.lua, which rechecks the session's access too) in one
// pipelined batch per Redis node (storage.ReadStreams), and each then
// writes what it missed and the ping.
//
// A stream's slot follows the golden-ratio sequence over the streams
// placed so far: any run of streams opened one after another, a burst of
// reconnects included, lands spread evenly over the period.
type beats struct {
	s       *Server
	tick    time.Duration
	mu      sync.Mutex
	slots   [][]*sseStream
	placed  uint64
	cur     int
	started bool
	stop    chan struct{}
	work    chan []*sseStream // to the idle beat workers
}

// beatWorkers wait for the wheel's batches: a batch's Redis call grows a
// goroutine's stack, and one started per tick (20 a second) grew one each
// time.
const beatWorkers = 2

func newBeats(s *Server, period time.Duration) *beats {
	n := min(max(int(period/beatSlotEvery), 1), beatMaxSlots)
	return &beats{s: s, tick: period / time.Duration(n), slots: make([][]*sseStream, n), stop: make(chan struct{}),
		work: make(chan []*sseStream)}
}

// goldenFrac is 1/φ: the fractional parts of k/φ spread evenly over [0, 1)
// for any run of consecutive k.
const goldenFrac = 0.6180339887498949

// join gives st a slot; its first heartbeat comes within a period.
func (b *beats) join(st *sseStream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.started = true
		go b.run()
		for range beatWorkers {
			go func() {
				for {
					select {
					case due := <-b.work:
						b.s.beat(due)
					case <-b.stop:
						return
					}
				}
			}()
		}
	}
	b.placed++
	f := float64(b.placed) * goldenFrac
	f -= float64(uint64(f))
	i := min(int(f*float64(len(b.slots))), len(b.slots)-1)
	st.slot, st.pos = i, len(b.slots[i])
	b.slots[i] = append(b.slots[i], st)
}

// leave removes st from its slot.
func (b *beats) leave(st *sseStream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots[st.slot]
	last := s[len(s)-1]
	s[st.pos], last.pos = last, st.pos
	s[len(s)-1] = nil
	b.slots[st.slot] = s[:len(s)-1]
	st.slot, st.pos = -1, -1
}

// close stops the wheel (Shutdown).
func (b *beats) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
}

func (b *beats) run() {
	t := time.NewTicker(b.tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.stop:
			return
		}
		b.mu.Lock()
		var due []*sseStream
		if s := b.slots[b.cur]; len(s) > 0 {
			due = append(due, s...)
		}
		b.cur = (b.cur + 1) % len(b.slots)
		b.mu.Unlock()
		if len(due) > 0 {
			// On another goroutine: a slow Redis node holds this slot's
			// streams, not the wheel. An idle worker's, else a new one.
			select {
			case b.work <- due:
			default:
				go b.s.beat(due)
			}
		}
	}
}

// beat reads, in one batch, what each of the streams due has not sent, and
// hands each its heartbeat with its read. A stream whose queue is full
// skips this heartbeat (the hub is cutting it off).
func (s *Server) beat(due []*sseStream) {
	reqs := make([]storage.StreamReadReq, len(due))
	for i, st := range due {
		reqs[i] = storage.StreamReadReq{Session: st.session, Token: st.token, AfterID: st.sentID()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	res := s.store.ReadStreams(ctx, reqs, streamMaxReplay)
	cancel()
	for i, st := range due {
		st.post(&signal{beat: &res[i]}, true)
	}
}

package ingest_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
)

// TestSMTPRefusedConnectionsLingerUnderACap: connections refused before
// their session hold no session slot, so the time each lingers after its
// 421 (draining, up to 500 ms, so that a pipelining client reads the reply)
// is capped node-wide: a burst of refused connections that stay open gets
// every 421, and at most 64 of them linger (the rest are closed at once).
func TestSMTPRefusedConnectionsLingerUnderACap(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxSessions: 1})
	if _, _, got := dialGreeting(t, h.addr); !strings.HasPrefix(got, "220 ") {
		t.Fatalf("greeting %q, want 220", got)
	}
	const burst = 200
	var (
		wg      sync.WaitGroup
		refused atomic.Int32
		peak    atomic.Int64
		stop    = make(chan struct{})
	)
	go func() { // the gauge's peak while the burst lingers
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v := int64(h.metric(t, "mayfly_smtp_refused_lingering")); v > peak.Load() {
				peak.Store(v)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	conns := make([]net.Conn, burst)
	for i := range burst {
		wg.Go(func() {
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = c // kept open: the client never closes first
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if line, _ := bufio.NewReader(c).ReadString('\n'); strings.HasPrefix(line, "421 4.4.5") {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	if got := refused.Load(); got != burst {
		t.Errorf("%d of %d refused connections read their 421 4.4.5", got, burst)
	}
	if got := peak.Load(); got > 64 || got == 0 {
		t.Errorf("refused connections lingering at once: peak %d, want 1..64", got)
	}
	waitFor(t, func() bool { return h.metric(t, "mayfly_smtp_refused_lingering") == 0 })
}

package edge_test

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
)

// rawStream opens GET /events for u on a plain TCP connection and reads the
// response up to the stream's retry: field, which it returns.
func (u *user) rawStream(t *testing.T) (*net.TCPConn, *bufio.Reader, int) {
	t.Helper()
	base, _ := url.Parse(u.e.base)
	c, err := net.Dial("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var cookies []string
	for _, ck := range u.hc.Jar.Cookies(base) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	req := "GET " + base.Path + "/events HTTP/1.1\r\nHost: " + base.Host + "\r\nX-Forwarded-For: " + randomIP() +
		"\r\nCookie: " + strings.Join(cookies, "; ") + "\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /events: %v %v", resp, err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "retry: "); ok {
			n, _ := strconv.Atoi(v)
			c.SetReadDeadline(time.Time{})
			return c.(*net.TCPConn), br, n
		}
	}
	t.Fatalf("no retry: field: %v", sc.Err())
	return nil, nil, 0
}

// streamGoroutines counts the goroutines of event streams in this process:
// those serving a stream (none while it is idle). Subscriptions hold none
// per stream: the node's Receiver has one connection per primary.
func streamGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "edge.(*Server).serve") {
			n++
		}
	}
	return n
}

// Clients that close (FIN) or reset (RST) their stream's connection are
// noticed as they go, not by polling each stream every second: with a
// heartbeat of a minute, all of 20 streams, their goroutines and their
// subscriptions are gone within 400 ms. Not parallel: it counts the
// process's goroutines.
func TestEventsGonePeersFreedAtOnce(t *testing.T) {
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = time.Minute })
	before := streamGoroutines()
	const n = 20
	conns := make([]*net.TCPConn, n)
	for i := range conns {
		u := e.newUser("")
		u.open()
		conns[i], _, _ = u.rawStream(t)
	}
	e.awaitMetric("mayfly_events_streams_open", n, 2*time.Second)
	time.Sleep(200 * time.Millisecond)
	open := streamGoroutines() - before
	t.Logf("%d idle streams: %d goroutines", n, open)
	if open > 0 {
		t.Errorf("%d idle streams hold %d goroutines, want none", n, open)
	}
	for i, c := range conns {
		if i%2 == 1 {
			c.SetLinger(0) // close sends a reset
		}
		c.Close()
	}
	closed := time.Now()
	took := e.awaitMetric("mayfly_events_streams_open", 0, 3*time.Second)
	if took > 400*time.Millisecond {
		t.Errorf("streams of gone clients ended after %v, want within 400 ms (a per-stream poll each second)", took)
	}
	for streamGoroutines() > before {
		if time.Since(closed) > time.Second {
			t.Fatalf("%d stream goroutines %v after every client went (%d before)", streamGoroutines(), time.Since(closed), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The heartbeats of streams opened together are spread over the period,
// each still once a period: the first ping of each of 10 streams opened in
// a burst falls in its own part of the period.
func TestEventsHeartbeatsSpread(t *testing.T) {
	t.Parallel()
	const period = 2 * time.Second
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = period })
	const n = 10
	var users []*user
	for range n {
		u := e.newUser("")
		u.open()
		users = append(users, u)
	}
	type pings struct{ at []time.Time }
	got := make([]pings, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for i, u := range users {
		c, br, _ := u.rawStream(t)
		c.SetReadDeadline(time.Now().Add(2*period + time.Second))
		wg.Go(func() {
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if strings.HasPrefix(line, ": ping") {
					mu.Lock()
					got[i].at = append(got[i].at, time.Now())
					done := len(got[i].at) == 2
					mu.Unlock()
					if done {
						return
					}
				}
			}
		})
	}
	opened := time.Since(start)
	wg.Wait()
	var first []time.Duration
	for i, p := range got {
		if len(p.at) < 2 {
			t.Fatalf("stream %d: %d pings in %v, want 2 (heartbeat %v)", i, len(p.at), 2*period+time.Second, period)
		}
		if d := p.at[1].Sub(p.at[0]); d < period-400*time.Millisecond || d > period+400*time.Millisecond {
			t.Errorf("stream %d: pings %v apart, want %v", i, d, period)
		}
		first = append(first, p.at[0].Sub(start))
	}
	slices.Sort(first)
	t.Logf("opened in %v; first pings at %v", opened, first)
	// Evenly spread, the 10 first pings are a tenth of the period apart;
	// at most a third of the period between two of them (around the
	// circle), where a ticker per stream sends them all within the time
	// the streams took to open.
	for i := range first {
		next := first[(i+1)%n]
		if i == n-1 {
			next += period
		}
		if gap := next - first[i]; gap > period/3 {
			t.Errorf("first pings %v: a gap of %v, want at most %v", first, gap, period/3)
			break
		}
	}
}

// Each stream suggests its own reconnect delay (retry:, 1000-5999 ms), so
// that the clients of a node that stops come back spread out.
func TestEventsRetrySpread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := map[int]bool{}
	for range 12 {
		u := e.newUser("")
		u.open()
		c, _, ms := u.rawStream(t)
		c.Close()
		if ms < 1000 || ms >= 6000 {
			t.Errorf("retry: %d, want 1000-5999", ms)
		}
		seen[ms] = true
	}
	if len(seen) < 6 {
		t.Errorf("12 streams suggested %d distinct delays (%v), want them spread", len(seen), seen)
	}
}

// A stream that does not open because the node is full gets a 503 whose
// Retry-After is 1, 2 or 3 s, drawn per answer.
func TestEventsRetryAfterSpread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.MaxStreams = 1 })
	u := e.newUser("")
	u.open()
	u.openStream()
	seen := map[string]int{}
	for range 15 {
		v := e.newUser("")
		v.open()
		_, r := v.openStream()
		if r == nil || r.status != 503 || r.code() != "REQUEST_PROTECTION" {
			t.Fatalf("a stream over MaxStreams: %+v", r)
		}
		ra := r.header.Get("Retry-After")
		if ra != "1" && ra != "2" && ra != "3" {
			t.Errorf("Retry-After = %q, want 1, 2 or 3", ra)
		}
		seen[ra]++
	}
	if len(seen) < 2 {
		t.Errorf("Retry-After of 15 refused streams: %v, want them spread", seen)
	}
}

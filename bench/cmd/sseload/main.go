// Command sseload opens one event stream (GET /v1/events) for each inbox of a
// sessions file, then sends mail to those inboxes over SMTP at a steady rate
// and measures, for every message, the time from its SMTP 250 to its
// message.received event on the inbox's stream. With -rss-pid it also reads
// the edge's resident memory before and after opening the streams.
//
//	sseload -api http://127.0.0.1:8080/v1 -smtp 127.0.0.1:2525 -sessions s.txt -rate 500 -duration 5s
//
// A sessions file has one inbox per line: its address and its Cookie header
// (service_session=…), separated by a tab. Or -make N with -redis makes N
// inboxes in storage itself (bench/streams.sh). It prints one JSON line
// per run.
//
// With -idle it holds the streams idle for that long first and reports the
// edge's CPU (from /proc) and Redis's (INFO cpu of every node, with -redis)
// per stream per second; with -metrics, the edge's Go heap and goroutines
// per stream. With -reconnect every stream reconnects as the official
// clients do (README, Events): after it ends, the first attempt waits the
// stream's last retry: plus up to 250 ms, a 503 waits its Retry-After, other
// failures back off (full jitter, 500 ms doubling to 5 s). With -storm it
// then writes the file -ready and waits for the edge to go and come back
// (bench/streams.sh kills and restarts it): how long until every stream
// that broke is open again.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
	"github.com/mayfly/mayfly/storage"
	"github.com/redis/rueidis"
)

type options struct {
	api, smtp, sessions, src string
	bind                     string // loopback CIDR for the streams' source addresses; empty: 127.0.0.1
	streams, ipBase, conns   int
	rate                     float64
	runs                     int
	duration, settle, wait   time.Duration
	rssPid                   int
	// bench/streams.sh
	redis, prefix, metrics, ready string
	make                          int
	idle, storm                   time.Duration
	reconnect                     bool
}

func main() {
	var o options
	flag.StringVar(&o.api, "api", "http://127.0.0.1:8080/v1", "API base URL")
	flag.StringVar(&o.smtp, "smtp", "127.0.0.1:2525", "SMTP server to send through")
	flag.StringVar(&o.sessions, "sessions", "", "sessions file: address<TAB>cookie per line")
	flag.StringVar(&o.src, "src", "127.2.0.0/16", "loopback CIDR for SMTP source addresses")
	flag.StringVar(&o.bind, "bind", "", "loopback CIDR for the streams' source addresses (beyond ~28,000 streams, the ports of one address); empty: do not bind")
	flag.IntVar(&o.streams, "streams", 0, "streams to open (0: one per line of -sessions)")
	flag.IntVar(&o.ipBase, "ip-base", 0, "offset into 198.18.0.0/15 of the X-Forwarded-For client of each stream")
	flag.IntVar(&o.conns, "conns", 16, "concurrent SMTP connections of the sender")
	flag.Float64Var(&o.rate, "rate", 500, "messages per second (0: open the streams, measure memory, send nothing)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "how long to send")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "pause after opening the streams, before reading RSS")
	flag.DurationVar(&o.wait, "wait", 2*time.Second, "how long to wait for the last events after sending")
	flag.IntVar(&o.rssPid, "rss-pid", 0, "pid of the edge node whose RSS to report (0: none)")
	flag.IntVar(&o.runs, "runs", 1, "send phases with the same streams open; one JSON line each")
	flag.StringVar(&o.redis, "redis", "", "Redis seeds: for -make, and Redis's CPU over -idle")
	flag.StringVar(&o.prefix, "prefix", "mf", "key prefix of the inboxes -make makes (the edge's MAYFLY_REDIS_PREFIX)")
	flag.IntVar(&o.make, "make", 0, "make this many inboxes in storage (with -redis) instead of reading -sessions")
	flag.StringVar(&o.metrics, "metrics", "", "the edge's admin /metrics URL: Go heap and goroutines per stream")
	flag.DurationVar(&o.idle, "idle", 0, "hold the streams idle this long before sending, and report CPU per stream")
	flag.BoolVar(&o.reconnect, "reconnect", false, "streams reconnect as the official clients do")
	flag.DurationVar(&o.storm, "storm", 0, "after the runs, write -ready and wait up to this long for the edge's restart and every stream's return (with -reconnect)")
	flag.StringVar(&o.ready, "ready", "", "file written when the streams wait for the restart (-storm)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sseload:", err)
		os.Exit(1)
	}
}

type inbox struct{ address, cookie string }

func readSessions(path string, n int) ([]inbox, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []inbox
	sc := bufio.NewScanner(f)
	for sc.Scan() && (n == 0 || len(out) < n) {
		addr, cookie, ok := strings.Cut(sc.Text(), "\t")
		if ok {
			out = append(out, inbox{addr, cookie})
		}
	}
	if n > 0 && len(out) < n {
		return nil, fmt.Errorf("%s: %d sessions, want %d", path, len(out), n)
	}
	return out, sc.Err()
}

func run(o options) error {
	var boxes []inbox
	var rdb rueidis.Client
	var err error
	if o.redis != "" {
		if rdb, err = rueidis.NewClient(storage.ClientOption(strings.Split(o.redis, ","), 5*time.Second)); err != nil {
			return err
		}
		defer rdb.Close()
	}
	if o.make > 0 {
		if rdb == nil {
			return fmt.Errorf("-make needs -redis")
		}
		if boxes, err = makeInboxes(rdb, o.prefix, o.make); err != nil {
			return err
		}
	} else if boxes, err = readSessions(o.sessions, o.streams); err != nil {
		return err
	}
	if len(boxes) == 0 {
		return fmt.Errorf("no sessions")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	extra := map[string]float64{"streams": float64(len(boxes))}
	rss := func(key string) {
		if o.rssPid > 0 {
			if kib, err := load.RSSKiB(o.rssPid); err == nil {
				extra[key] = float64(kib) / 1024
			}
		}
	}
	rss("rss_before_mib")
	metric := func(prefix string) {
		if o.metrics == "" {
			return
		}
		m, err := scrape(o.metrics)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sseload: metrics:", err)
			return
		}
		extra[prefix+"heap_inuse_mib"] = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
		extra[prefix+"stack_inuse_mib"] = m["go_memstats_stack_inuse_bytes"] / (1 << 20)
		extra[prefix+"goroutines"] = m["go_goroutines"]
	}
	metric("before_")
	if o.idle > 0 {
		// The edge's CPU with no stream open, over a third of -idle: what
		// the idle figures per stream are net of.
		base := map[string]float64{}
		if err := idleCPU(ctx, options{idle: o.idle / 3, rssPid: o.rssPid}, nil, 1, base); err != nil {
			return err
		}
		extra["baseline_edge_cores"] = base["idle_edge_cores"]
	}

	var (
		mu       sync.Mutex
		arrived  = map[string]time.Time{}
		accepted = map[string]time.Time{}
		broken   atomic.Int64 // streams that ended or failed before we closed them
		closing  atomic.Bool
		firstErr atomic.Value
	)
	noteErr := func(err error) { firstErr.CompareAndSwap(nil, err.Error()) }
	var storm stormStats

	bind, err := load.NewSourcePool(o.bind)
	if err != nil {
		return err
	}
	// Open every stream, 64 at a time.
	t0 := time.Now()
	streams := make([]*load.Stream, len(boxes))
	var next atomic.Int64
	var wg sync.WaitGroup
	var openErrs atomic.Int64
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(boxes) || ctx.Err() != nil {
					return
				}
				st, err := load.OpenStream(o.api, boxes[i].cookie, load.ClientIP(o.ipBase, i), bind.Addr(i), 10*time.Second)
				if err != nil {
					openErrs.Add(1)
					noteErr(err)
					continue
				}
				streams[i] = st
				go func() {
					for {
						err := st.Read(func(ev load.Event) {
							if ev.Type != "message.received" {
								return
							}
							var s struct{ Subject string }
							if json.Unmarshal([]byte(ev.Data), &s) == nil {
								now := time.Now()
								mu.Lock()
								arrived[s.Subject] = now
								mu.Unlock()
							}
						})
						if closing.Load() {
							return
						}
						if !o.reconnect {
							broken.Add(1)
							noteErr(fmt.Errorf("stream ended: %v", err))
							return
						}
						if st = storm.reconnect(ctx, &closing, st, func() (*load.Stream, error) {
							return load.OpenStream(o.api, boxes[i].cookie, load.ClientIP(o.ipBase, i), bind.Addr(i), 10*time.Second)
						}); st == nil {
							return
						}
						mu.Lock()
						streams[i] = st
						mu.Unlock()
					}
				}()
			}
		})
	}
	wg.Wait()
	extra["open_seconds"] = time.Since(t0).Seconds()
	time.Sleep(o.settle)
	rss("rss_after_mib")
	if b, a := extra["rss_before_mib"], extra["rss_after_mib"]; a > 0 {
		extra["kib_per_stream"] = (a - b) * 1024 / float64(len(boxes))
	}
	metric("after_")
	if o.metrics != "" {
		n := float64(len(boxes)) - float64(openErrs.Load())
		extra["heap_kib_per_stream"] = (extra["after_heap_inuse_mib"] - extra["before_heap_inuse_mib"]) * 1024 / n
		extra["stack_kib_per_stream"] = (extra["after_stack_inuse_mib"] - extra["before_stack_inuse_mib"]) * 1024 / n
		extra["goroutines_per_stream"] = (extra["after_goroutines"] - extra["before_goroutines"]) / n
	}
	if o.idle > 0 {
		if err := idleCPU(ctx, o, rdb, len(boxes)-int(openErrs.Load()), extra); err != nil {
			return err
		}
	}

	var results []load.Result
	for run := range max(o.runs, 1) {
		res := load.Result{Tool: "sseload"}
		runExtra := maps.Clone(extra)
		if o.rate > 0 {
			var rcpts []string
			for i, st := range streams {
				if st != nil {
					rcpts = append(rcpts, boxes[i].address)
				}
			}
			if len(rcpts) == 0 {
				return fmt.Errorf("no stream opened: %v", firstErr.Load())
			}
			mu.Lock()
			clear(accepted)
			clear(arrived)
			mu.Unlock()
			tag := strconv.FormatInt(time.Now().UnixNano(), 36)
			sl := load.SMTPLoad{
				Addr: o.smtp, Rcpts: rcpts, Conns: o.conns, Duration: o.duration, PerConn: 1,
				Size: 1024, Rate: o.rate,
				Subject:  func(i int) string { return "ev-" + tag + "-" + strconv.Itoa(i) },
				Accepted: func(_ int, subject string, at time.Time) { mu.Lock(); accepted[subject] = at; mu.Unlock() },
			}
			// Each run sends from its own /24 of the source range, so that
			// ingest's per-IP limits see fresh clients every run.
			if sl.Sources, err = load.NewSourcePool(o.src); err != nil {
				return err
			}
			sl.Sources = sl.Sources.Offset(run * 4096)
			sent := sl.Run(ctx)
			runExtra["smtp_rate"] = sent.Rate
			runExtra["smtp_p99_ms"] = sent.P99ms
			if sent.FirstErr != "" {
				noteErr(fmt.Errorf("smtp: %s", sent.FirstErr))
			}
			// Wait for the last events.
			deadline := time.Now().Add(o.wait)
			for time.Now().Before(deadline) {
				mu.Lock()
				missing := 0
				for s := range accepted {
					if _, ok := arrived[s]; !ok {
						missing++
					}
				}
				mu.Unlock()
				if missing == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			lat := make([]time.Duration, 0, len(accepted))
			missing := 0
			for s, at := range accepted {
				if ev, ok := arrived[s]; ok {
					lat = append(lat, max(0, ev.Sub(at)))
				} else {
					missing++
				}
			}
			mu.Unlock()
			if missing > 0 {
				noteErr(fmt.Errorf("%d accepted messages had no event within %v", missing, o.wait))
			}
			res = load.Summarize("sseload", lat, sent.Errors+missing, time.Duration(sent.Seconds*float64(time.Second)))
			runExtra["missing_events"] = float64(missing)
		}
		rss("rss_after_mib")
		runExtra["rss_now_mib"] = extra["rss_after_mib"]
		res.Extra = runExtra
		results = append(results, res)
	}
	if o.storm > 0 && o.reconnect && len(results) > 0 {
		storm.await(ctx, o, results[len(results)-1].Extra)
	}
	closing.Store(true)
	mu.Lock()
	defer mu.Unlock()
	for _, st := range streams {
		if st != nil {
			st.Close()
		}
	}
	for _, res := range results {
		res.Errors += int(openErrs.Load() + broken.Load())
		res.Extra["open_errors"] = float64(openErrs.Load())
		res.Extra["broken_streams"] = float64(broken.Load())
		if e, ok := firstErr.Load().(string); ok {
			res.FirstErr = e
		}
		if err := res.Print(os.Stdout); err != nil {
			return err
		}
	}
	return nil
}

// makeInboxes makes n inboxes directly in storage, as bench F does (10,000
// creations through the API take minutes of the global cap), 32 at a time.
func makeInboxes(rdb rueidis.Client, prefix string, n int) ([]inbox, error) {
	store := storage.New(rdb, storage.Config{KeyPrefix: prefix})
	out := make([]inbox, n)
	err := load.Parallel(n, 32, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, scoped, err := store.Create(ctx, storage.NewTag(), "mayfly.test", 2*time.Hour, "bench-streams")
		if err != nil {
			return err
		}
		_, sess, err := store.Select(ctx, m.ID, scoped)
		out[i] = inbox{address: m.Address, cookie: "service_session=" + sess.String()}
		return err
	})
	return out, err
}

// scrape reads the unlabelled series of a Prometheus text page.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// procCPU is the CPU time pid used so far (utime + stime of /proc/pid/stat).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ: 100 on Linux
}

// redisCPU is the CPU time every Redis node used so far (INFO cpu).
func redisCPU(ctx context.Context, rdb rueidis.Client) (time.Duration, error) {
	var total float64
	for _, n := range rdb.Nodes() {
		info, err := n.Do(ctx, n.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// idleCPU holds the streams idle for o.idle and records the edge's and
// Redis's CPU per stream per second over it, in µs.
func idleCPU(ctx context.Context, o options, rdb rueidis.Client, streams int, extra map[string]float64) error {
	if streams <= 0 || o.rssPid <= 0 {
		return fmt.Errorf("-idle needs -rss-pid and open streams")
	}
	e0, err := procCPU(o.rssPid)
	if err != nil {
		return err
	}
	var r0 time.Duration
	if rdb != nil {
		if r0, err = redisCPU(ctx, rdb); err != nil {
			return err
		}
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.idle):
	}
	secs := time.Since(t0).Seconds()
	e1, err := procCPU(o.rssPid)
	if err != nil {
		return err
	}
	extra["idle_seconds"] = secs
	extra["idle_edge_cores"] = (e1 - e0).Seconds() / secs
	extra["idle_edge_us_per_stream_s"] = float64((e1 - e0).Microseconds()) / secs / float64(streams)
	if base, ok := extra["baseline_edge_cores"]; ok {
		extra["idle_edge_net_us_per_stream_s"] = ((e1-e0).Seconds()/secs - base) * 1e6 / float64(streams)
	}
	if rdb != nil {
		r1, err := redisCPU(ctx, rdb)
		if err != nil {
			return err
		}
		extra["idle_redis_cores"] = (r1 - r0).Seconds() / secs
		extra["idle_redis_us_per_stream_s"] = float64((r1 - r0).Microseconds()) / secs / float64(streams)
	}
	return nil
}

// stormStats follows the streams that broke and came back (-reconnect).
type stormStats struct {
	mu         sync.Mutex
	down       int // streams broken, not back yet
	broke      int // breaks seen
	back       int // reopened
	firstBreak time.Time
	lastBack   time.Time
	outage     []time.Duration // per break: until reopened
	refused503 int
	failed     int // other failed attempts (refused connections, timeouts)
	failures   map[string]int
}

// failureKind is a failed attempt's class, for the log.
func failureKind(err error) string {
	var se *load.StatusError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return "status " + strconv.Itoa(se.Status)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EMFILE):
		return "the load process's descriptors ran out"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	}
	return err.Error()
}

// reconnect reopens a stream that ended, as the official clients do, and
// returns it; nil when sseload is closing.
func (s *stormStats) reconnect(ctx context.Context, closing *atomic.Bool, ended *load.Stream, open func() (*load.Stream, error)) *load.Stream {
	ended.Close() // the load process holds one descriptor per stream, not two
	at := time.Now()
	s.mu.Lock()
	if s.down == 0 && (s.firstBreak.IsZero() || s.lastBack.Before(s.firstBreak) || at.Sub(s.lastBack) > 30*time.Second) {
		s.firstBreak = at
	}
	s.down++
	s.broke++
	s.mu.Unlock()
	wait := ended.Retry + time.Duration(rand.Int64N(int64(250*time.Millisecond)))
	for attempt := 0; ; attempt++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if closing.Load() {
			return nil
		}
		st, err := open()
		if err == nil {
			now := time.Now()
			s.mu.Lock()
			s.down--
			s.back++
			s.lastBack = now
			s.outage = append(s.outage, now.Sub(at))
			s.mu.Unlock()
			return st
		}
		var se *load.StatusError
		s.mu.Lock()
		if errors.As(err, &se) && se.Status == 503 {
			s.refused503++
		} else {
			s.failed++
		}
		if s.failures == nil {
			s.failures = map[string]int{}
		}
		s.failures[failureKind(err)]++
		s.mu.Unlock()
		if errors.As(err, &se) && se.RetryAfter > 0 {
			wait = se.RetryAfter
			continue
		}
		// Full jitter: 500 ms doubling to 5 s.
		wait = time.Duration(rand.Int64N(int64(min(500*time.Millisecond<<min(attempt, 4), 5*time.Second)))) + time.Millisecond
	}
}

// await writes the ready file and waits, up to o.storm, for streams to
// break and all of them to be back; its figures go into extra.
func (s *stormStats) await(ctx context.Context, o options, extra map[string]float64) {
	if o.ready != "" {
		_ = os.WriteFile(o.ready, []byte("ready\n"), 0o644)
	}
	deadline := time.Now().Add(o.storm)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Lock()
		done := s.broke > 0 && s.down == 0 && time.Since(s.lastBack) > 3*time.Second
		s.mu.Unlock()
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stderr, "sseload: storm: failed attempts by kind: %v\n", s.failures)
	extra["storm_breaks"] = float64(s.broke)
	extra["storm_back"] = float64(s.back)
	extra["storm_not_back"] = float64(s.down)
	extra["storm_503"] = float64(s.refused503)
	extra["storm_failed_attempts"] = float64(s.failed)
	if s.back > 0 {
		extra["storm_seconds"] = s.lastBack.Sub(s.firstBreak).Seconds()
		slices.Sort(s.outage)
		extra["storm_outage_p50_s"] = s.outage[len(s.outage)/2].Seconds()
		extra["storm_outage_max_s"] = s.outage[len(s.outage)-1].Seconds()
	}
}

// Command sseload opens one event stream (GET /v1/events) for each inbox of a
// sessions file, then sends mail to those inboxes over SMTP at a steady rate
// and measures, for every message, the time from its SMTP 250 to its
// message.received event on the inbox's stream. With -rss-pid it also reads
// the edge's resident memory before and after opening the streams.
//
//	sseload -api http://127.0.0.1:8080/v1 -smtp 127.0.0.1:2525 -sessions s.txt -rate 500 -duration 5s
//
// A sessions file has one inbox per line: its address and its Cookie header
// (service_session=…), separated by a tab. It prints one JSON line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
)

type options struct {
	api, smtp, sessions, src string
	bind                     string // loopback CIDR for the streams' source addresses; empty: 127.0.0.1
	streams, ipBase, conns   int
	rate                     float64
	runs                     int
	duration, settle, wait   time.Duration
	rssPid                   int
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
	boxes, err := readSessions(o.sessions, o.streams)
	if err != nil {
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

	var (
		mu       sync.Mutex
		arrived  = map[string]time.Time{}
		accepted = map[string]time.Time{}
		broken   atomic.Int64 // streams that ended or failed before we closed them
		closing  atomic.Bool
		firstErr atomic.Value
	)
	noteErr := func(err error) { firstErr.CompareAndSwap(nil, err.Error()) }

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
					if !closing.Load() {
						broken.Add(1)
						noteErr(fmt.Errorf("stream ended: %v", err))
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
	closing.Store(true)
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

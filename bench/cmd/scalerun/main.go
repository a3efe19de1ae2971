// Command scalerun is `make bench-scale` (bench/scale.sh starts the cluster
// and the nodes, then runs it): it measures Redis memory per inbox, per
// message and per client IP under each Redis profile it is given, then
// fills the stack to N live inboxes through the API (one 2 KiB message
// each), measuring memory, A's and D's shapes and creation throughput at
// 1,000 / 100,000 / N, and finally watches the population expire. It
// replaces its section of -out (bench/RESULTS.md) and prints its tables.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
	"github.com/mayfly/mayfly/bench/internal/results"
	"github.com/mayfly/mayfly/storage"
	"github.com/redis/rueidis"
)

type run struct {
	ctx          context.Context
	rdb          rueidis.Client
	prim         []rueidis.Client
	store        *storage.Store
	http         *http.Client
	api, smtp    string
	prefix       string
	cookiePrefix string
	ipNext       int // next fresh client IP (clientIP)
	sharedNext   int // next fresh client IP of sharedNetIP
	src          *load.SourcePool
	srcNext      int // next fresh SMTP source address
	template     storage.NewMessage
	deployed     map[string]string // the Redis parameters as the cluster was started
	createRate   float64           // inboxes per second in the memory model
	failures     int               // probes with errors, a failed census
	out          strings.Builder
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scalerun: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// freshIPs reserves n client IPs never used before in this run.
func (r *run) freshIPs(n int) int {
	b := r.ipNext
	r.ipNext += n
	return b
}

// freshSharedIPs reserves n client IPs of sharedNetIP never used before in
// this run, starting at a network of their own.
func (r *run) freshSharedIPs(n int) int {
	r.sharedNext = (r.sharedNext + netMates - 1) / netMates * netMates
	b := r.sharedNext
	r.sharedNext += n
	return b
}

// sources returns a source pool starting past every address used so far
// and reserves n addresses of it.
func (r *run) sources(n int) *load.SourcePool {
	p := r.src.Offset(r.srcNext)
	r.srcNext += n
	return p
}

func main() {
	var (
		redisAddrs = flag.String("redis", "", "cluster seed addresses, comma separated")
		api        = flag.String("api", "http://127.0.0.1:8080/v1", "the edge's API base")
		smtpAddr   = flag.String("smtp", "127.0.0.1:2525", "the ingest's SMTP address")
		n          = flag.Int("n", 1_000_000, "live inboxes to fill to")
		perIP      = flag.Int("per-ip", 4, "inboxes per client IP in the fill (N/per-ip distinct IPs)")
		memSample  = flag.Int("mem-sample", 2000, "inboxes per step of the memory model")
		profiles   = flag.String("profiles", "", "Redis profiles the memory model compares, ';'-separated name=param:value,…; the last one should be the deploy's (empty params: the cluster as configured)")
		workers    = flag.Int("workers", 64, "concurrent API clients of the fill")
		fillRate   = flag.Float64("fill-rate", 0, "first guess of inboxes per second, for the lifetimes (0: 0.6 × the memory model's)")
		outFile    = flag.String("out", "", "results file (markdown) whose section of this run (scale, or scale-memory with -memory-only) is replaced")
		label      = flag.String("label", "", "what this run measured (commit, machine), for the results' heading")
		spread     = flag.Duration("spread", 2*time.Minute, "how far apart the fill's expiries are spread (they start a minute after the fill's expected end)")
		expireAt   = flag.Duration("expire-at", 0, "when the fill's inboxes expire, from the fill's start (at most 55m); 0: a minute after the fill's expected end, from its measured rate")
		skipFill   = flag.Bool("memory-only", false, "run the memory model only")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	opt := storage.ClientOption(strings.Split(*redisAddrs, ","), 10*time.Second)
	rdb, err := rueidis.NewClient(opt)
	must(err)
	defer rdb.Close()
	src, err := load.NewSourcePool("127.0.0.0/8")
	must(err)
	r := &run{
		ctx: ctx, rdb: rdb, store: storage.New(rdb, storage.Config{}),
		http: load.NewHTTPClient(*workers + 64), api: *api, smtp: *smtpAddr,
		prefix: "mf", cookiePrefix: "mayfly", src: src, srcNext: 1 << 16,
	}
	r.prim, err = primaries(ctx, rdb)
	must(err)
	// One section of the results file per kind of run, replaced by the next
	// run of that kind: the full run, and the memory model alone.
	section, now := "scale", time.Now().UTC().Format("2006-01-02 15:04 UTC")
	if *skipFill {
		section = "scale-memory"
		fmt.Fprintf(&r.out, "## Memory model, %s inboxes a step (`SCALE_MEMORY_ONLY=1 make bench-scale`, %s)\n\n", thousands(float64(*memSample)), now)
	} else {
		fmt.Fprintf(&r.out, "## Scale: %s live inboxes (`make bench-scale`, %s)\n\n", thousands(float64(*n)), now)
	}
	if *label != "" {
		fmt.Fprintf(&r.out, "%s\n\n", *label)
	}
	must(r.template0())
	r.deployed = map[string]string{}
	for _, name := range profileParams {
		r.deployed[name] = r.configGet(name)
	}
	for _, p := range parseProfiles(*profiles) {
		r.memoryModel(p, *memSample)
	}
	if r.createRate > 0 && *fillRate == 0 {
		*fillRate = r.createRate * 0.6
	}
	if *fillRate == 0 {
		*fillRate = 500
	}
	if !*skipFill {
		f := r.newFill(*n, max(*n / *perIP, 1), *workers, *fillRate, *spread, min(*expireAt, 55*time.Minute))
		f.run()
	}
	fmt.Print(r.out.String())
	// A failed run's tables are printed (and kept in the log dir by
	// scale.sh), never written over the last good run's.
	if *outFile != "" && r.failures == 0 {
		must(results.ReplaceFile(*outFile, results.Section{Name: section, Body: r.out.String()}))
	}
	if r.failures > 0 {
		log.Fatalf("%d failed steps (see the log above)", r.failures)
	}
}

// template0 sends one 2 KiB message over SMTP and reads it back through the
// API: the fill's direct deliveries store exactly what ingest stored for it
// (its From, text and HTML bodies as parsed), under a subject of their own.
func (r *run) template0() error {
	in, err := r.openInbox(clientIP(r.freshIPs(1)), time.Now().Add(time.Minute))
	if err != nil {
		return err
	}
	res := load.SMTPLoad{Addr: r.smtp, Rcpts: []string{in.address}, Conns: 1, Msgs: 1, Size: 2048, Sources: r.sources(1)}.Run(r.ctx)
	if res.Errors > 0 {
		return fmt.Errorf("template message: %s", res.FirstErr)
	}
	var list struct {
		Data struct{ Items []struct{ ID string } }
	}
	if _, err := r.apiCall("GET", "/messages", in.ip, in.cookie, "", 200, &list); err != nil || len(list.Data.Items) != 1 {
		return fmt.Errorf("template message: list: %v (%d messages)", err, len(list.Data.Items))
	}
	var msg struct {
		Data struct {
			Message struct {
				From     string
				TextBody string `json:"text_body"`
				HTMLBody string `json:"html_body"`
			}
		}
	}
	if _, err := r.apiCall("GET", "/messages/"+list.Data.Items[0].ID, in.ip, in.cookie, "", 200, &msg); err != nil {
		return fmt.Errorf("template message: read: %w", err)
	}
	m := msg.Data.Message
	r.template = storage.NewMessage{From: m.From, Status: storage.StatusReady, Text: m.TextBody, HTML: m.HTMLBody}
	return r.deleteInbox(in)
}

// deliverDirect stores one copy of the template in address through
// storage.Store.Deliver, the call ingest makes once it has parsed a message.
func (r *run) deliverDirect(address, subject string) error {
	m := r.template
	m.Subject = subject
	m.Key = storage.DeliveryKey([]byte(subject))
	_, err := r.store.Deliver(r.ctx, address, m)
	return err
}

// deliverSMTP sends one 2 KiB message to each address over SMTP, perConn
// to a connection.
func (r *run) deliverSMTP(addrs []string, tag string) load.Result {
	if len(addrs) == 0 {
		return load.Result{}
	}
	perConn := 10
	return load.SMTPLoad{
		Addr: r.smtp, Rcpts: addrs, Conns: 16, Msgs: len(addrs), PerConn: perConn, Size: 2048,
		Sources: r.sources(len(addrs)/perConn + 64), Timeout: 30 * time.Second,
		Subject: func(i int) string { return fmt.Sprintf("%s-%d", tag, i) },
	}.Run(r.ctx)
}

func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

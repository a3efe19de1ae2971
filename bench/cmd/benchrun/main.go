// Command benchrun is `make bench`: on a running Redis Cluster it starts one
// mayfly edge, one mayfly ingest and the reference servers, runs every
// benchmark scenario of bench/README.md a bounded number of times, stops
// everything and writes the results (medians, p50/p99, targets) as Markdown,
// one section of -out per scenario (bench/internal/results).
//
//	benchrun -redis 127.0.0.1:7001,… -mayfly bin/mayfly -tools bench/bin -out bench/RESULTS.md
//
// -scale tiny runs each scenario once, briefly, at small sizes: what CI does
// so that the scripts cannot rot. Its figures mean nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/bench/internal/results"
	"github.com/redis/rueidis"
)

type scale struct {
	name               string
	runs               int
	httpDur, smtpDur   time.Duration // per run of A/B and of D
	eventDur           time.Duration // sending time of E and F
	flowRate           int           // C: flows per second
	flowDur            time.Duration // C: per run
	streams            int           // F
	eventRate, fRate   float64       // E, F: messages per second
	gRate              int           // G: requests per second from one IP
	gDur               time.Duration // G: per run
	globalCap          int           // G: creations per minute of the G edge (0: the default)
	globalAttempts     int           // G: creations attempted in one minute
	concs              []int         // D: concurrencies
	manyPerConn        int           // D: messages per connection in "many" mode
	redisRequests      int           // redis-benchmark -n
	dInboxes, eInboxes int
}

var scales = map[string]scale{
	"full": {
		name: "full", runs: 3, httpDur: 4 * time.Second, smtpDur: 3 * time.Second, eventDur: 5 * time.Second,
		flowRate: 80, flowDur: 10 * time.Second, streams: 10000, eventRate: 500, fRate: 200,
		gRate: 1000, gDur: 5 * time.Second, globalAttempts: 6000,
		concs: []int{1, 8, 32}, manyPerConn: 100, redisRequests: 200000, dInboxes: 32, eInboxes: 100,
	},
	"tiny": {
		name: "tiny", runs: 1, httpDur: time.Second, smtpDur: time.Second, eventDur: time.Second,
		flowRate: 5, flowDur: 2 * time.Second, streams: 100, eventRate: 50, fRate: 20,
		gRate: 100, gDur: 2 * time.Second, globalCap: 100, globalAttempts: 120,
		concs: []int{1, 8}, manyPerConn: 10, redisRequests: 10000, dInboxes: 8, eInboxes: 10,
	},
}

type bench struct {
	sc      scale
	redis   []string
	mayfly  string
	tools   string
	logs    string
	only    map[string]bool
	procs   []*proc
	rdb     rueidis.Client
	figures []*figure
	notes   []string
	info    machine
	profile bool

	edge, ingest, hello, sink, relay, gEdge *proc
	api, helloURL, smtp, sinkAddr, relayURL string
	ips                                     int // next fresh client IP for creations

	// plain is the stack on the 3-primary cluster; replicated (nil without
	// -redis-replicated) an edge and an ingest on 3 primaries + 3 replicas
	// with the default durability settings, for AR and DR.
	plain, replicated *stack
	redisR            []string
	opTables          []*opTable
	peers             []peer // D's other SMTP servers (Mailpit), if built
}

// stack is a Mayfly edge and ingest and the cluster they use.
type stack struct {
	a, d   string // scenario names of its A and D: "A", "D" or "AR", "DR"
	shape  string // the cluster, for the reports
	redis  []string
	edge   *proc
	ingest *proc
	api    string
	smtp   string
}

func (b *bench) tool(name string) string { return filepath.Join(b.tools, name) }

func main() {
	var (
		redis  = flag.String("redis", "", "Redis Cluster seeds, comma separated (deploy/cluster.sh addrs)")
		redisR = flag.String("redis-replicated", "", "every node of a 3 primary + 3 replica cluster (empty: no AR, DR)")
		mayfly = flag.String("mayfly", "bin/mayfly", "the mayfly binary")
		tools  = flag.String("tools", "bench/bin", "directory of the load tools and reference servers")
		out    = flag.String("out", "", "write the Markdown results here (empty: stdout only)")
		scaleF = flag.String("scale", "full", "full, or tiny (CI: once, briefly, small)")
		only   = flag.String("only", "", "run only these scenarios, comma separated (e.g. A,D)")
		logs   = flag.String("logs", "", "directory for server logs and tool output (empty: a temp dir)")
		runs   = flag.Int("runs", 0, "runs per scenario (0: the scale's; a quick look at a change, never for RESULTS.md)")
		prof   = flag.Bool("profile", false, "take CPU profiles of the nodes (pprof on their admin listener) during the first run of A, B and D (1/conn, c=32), and Redis command stats, into the log dir")
	)
	flag.Parse()
	sc, ok := scales[*scaleF]
	if !ok || *redis == "" {
		fmt.Fprintln(os.Stderr, "usage: benchrun -redis addrs [-scale full|tiny] [-out RESULTS.md]")
		os.Exit(2)
	}
	if *runs > 0 {
		sc.runs = *runs
	}
	b := &bench{sc: sc, redis: strings.Split(*redis, ","), mayfly: *mayfly, tools: *tools, logs: *logs, profile: *prof}
	if *redisR != "" {
		b.redisR = strings.Split(*redisR, ",")
	}
	if *only != "" {
		b.only = map[string]bool{}
		for s := range strings.SplitSeq(*only, ",") {
			b.only[strings.ToUpper(strings.TrimSpace(s))] = true
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := b.run(ctx, *out)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func (b *bench) run(ctx context.Context, out string) (err error) {
	if b.logs == "" {
		if b.logs, err = os.MkdirTemp("", "mayfly-bench-*"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(b.logs, 0o755); err != nil {
		return err
	}
	progress("logs and tool output in %s", b.logs)
	b.rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: b.redis, ShuffleInit: true})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	defer b.rdb.Close()
	b.info = b.machineInfo(ctx)
	if err := b.startStack(); err != nil {
		b.stopAll()
		return err
	}
	started := time.Now()
	serr := b.scenarios(ctx)
	for _, p := range b.procs {
		if err := p.alive(); err != nil && serr == nil {
			serr = err
		}
	}
	b.stopAll()
	sections := b.sections(time.Since(started))
	for _, s := range sections {
		fmt.Printf("%s\n", s.Body)
	}
	if out != "" && serr == nil && b.only == nil {
		if err := results.ReplaceFile(out, sections...); err != nil {
			return err
		}
		progress("replaced %d sections of %s", len(sections), out)
	}
	if serr != nil {
		return serr
	}
	// Errors and the limits must hold at any scale; a missed performance
	// target is reported in the table but does not fail the run.
	if missed := b.missed(true); len(missed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(missed, "; "))
	}
	if missed := b.missed(false); len(missed) > 0 && b.sc.name == "full" {
		progress("targets missed: %s", strings.Join(missed, "; "))
	}
	return nil
}

func (b *bench) stopAll() {
	for i := len(b.procs) - 1; i >= 0; i-- {
		b.procs[i].stop()
	}
	b.procs = nil
}

func (b *bench) mayflyEnv(prefix string, extra ...string) []string {
	return b.mayflyEnvOn(b.redis, prefix, extra...)
}

func (b *bench) mayflyEnvOn(redis []string, prefix string, extra ...string) []string {
	return append([]string{
		"MAYFLY_REDIS_ADDRS=" + strings.Join(redis, ","),
		"MAYFLY_REDIS_PREFIX=" + prefix,
		"MAYFLY_HTTP_ADDR=127.0.0.1:0",
		"MAYFLY_SMTP_ADDR=127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR=127.0.0.1:0",
		"MAYFLY_DOMAINS=mayfly.test",
		"MAYFLY_COOKIE_SECURE=false", // plain HTTP on loopback
		"MAYFLY_TRUSTED_PROXIES=127.0.0.1/32",
	}, extra...)
}

func (b *bench) startStack() (err error) {
	if b.edge, err = b.start("edge", b.mayfly, []string{"edge"}, b.mayflyEnv("mf"), "http", "admin"); err != nil {
		return err
	}
	if b.ingest, err = b.start("ingest", b.mayfly, []string{"ingest"}, b.mayflyEnv("mf"), "smtp", "admin"); err != nil {
		return err
	}
	// G's global cap runs on an edge of its own key prefix, so that its
	// minute window starts empty whatever the other scenarios created.
	var gEnv []string
	if b.sc.globalCap > 0 {
		gEnv = append(gEnv, fmt.Sprintf("MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE=%d", b.sc.globalCap))
	}
	if b.gEdge, err = b.start("edge-g", b.mayfly, []string{"edge"}, b.mayflyEnv("mfg", gEnv...), "http", "admin"); err != nil {
		return err
	}
	if b.hello, err = b.start("hello", b.tool("hello"), nil, nil, "http"); err != nil {
		return err
	}
	if b.sink, err = b.start("smtpsink", b.tool("smtpsink"), nil, nil, "smtp"); err != nil {
		return err
	}
	b.api = "http://" + b.edge.addrs["http"] + "/v1"
	b.helloURL = "http://" + b.hello.addrs["http"] + "/v1"
	b.smtp = b.ingest.addrs["smtp"]
	b.sinkAddr = b.sink.addrs["smtp"]
	if b.relay, err = b.start("flowrelay", b.tool("flowrelay"), []string{"-api", b.api, "-smtp", b.smtp}, nil, "http"); err != nil {
		return err
	}
	b.relayURL = "http://" + b.relay.addrs["http"]
	b.plain = &stack{a: "A", d: "D", shape: "3 primaries, no replicas", redis: b.redis,
		edge: b.edge, ingest: b.ingest, api: b.api, smtp: b.smtp}
	if len(b.redisR) > 0 {
		// The production shape: every primary has a replica, and the
		// durability settings are the defaults.
		r := &stack{a: "AR", d: "DR", shape: "3 primaries + 3 replicas, default durability", redis: b.redisR}
		if r.edge, err = b.start("edge-r", b.mayfly, []string{"edge"}, b.mayflyEnvOn(b.redisR, "mf"), "http", "admin"); err != nil {
			return err
		}
		if r.ingest, err = b.start("ingest-r", b.mayfly, []string{"ingest"}, b.mayflyEnvOn(b.redisR, "mf"), "smtp", "admin"); err != nil {
			return err
		}
		r.api, r.smtp = "http://"+r.edge.addrs["http"]+"/v1", r.ingest.addrs["smtp"]
		b.replicated = r
	}
	b.startPeers()
	progress("edge %s, ingest %s, edge-g %s, hello %s, smtpsink %s", b.edge.addrs["http"], b.smtp,
		b.gEdge.addrs["http"], b.hello.addrs["http"], b.sinkAddr)
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// Command wakeups counts what one delivery and one list page cost Redis and
// the SMTP server, in events rather than time, so that the count holds on a
// busy machine: Redis socket reads (each one a wake-up of the event loop),
// commands, the commands and bytes a primary sends its replicas, and the
// node's write syscalls by destination (SMTP replies, Redis, HTTP, logs).
//
// It runs each binary given as `mayfly all` against one Redis Cluster (with
// replicas, so that durable deliveries WAIT as in production) under strace,
// in rounds with the binaries' order rotated, and drives three bounded
// phases through each: -msgs messages at one message per connection, -msgs
// at 100 per connection (RSET between), and -pages GET /messages of an
// inbox of 20 messages. See bench/README.md, "Counting wake-ups".
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wakeups:", err)
		os.Exit(1)
	}
}

type binary struct{ name, path string }

var runID = strconv.FormatInt(time.Now().Unix()%(36*36*36*36), 36)

func run() error {
	var (
		bins   = flag.String("bins", "", "name=path,… of the mayfly binaries to compare (required)")
		redis  = flag.String("redis", "", "comma-separated Redis Cluster addresses, every node (required)")
		msgs   = flag.Int("msgs", 400, "messages per SMTP phase (at most 5000)")
		pages  = flag.Int("pages", 400, "list pages (at most 5000)")
		conc   = flag.Int("c", 1, "concurrent connections (1: every count is per request, no batching)")
		rounds = flag.Int("rounds", 2, "rounds, the binaries' order rotated each round")
		dir    = flag.String("dir", "", "where logs and traces go (default: a temp dir)")
		trace  = flag.Bool("strace", true, "count the node's write syscalls (strace)")
	)
	flag.Parse()
	if *bins == "" || *redis == "" {
		flag.Usage()
		return errors.New("-bins and -redis are required")
	}
	*msgs, *pages = min(*msgs, 5000), min(*pages, 5000)
	var bs []binary
	for item := range strings.SplitSeq(*bins, ",") {
		name, path, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("-bins: %q is not name=path", item)
		}
		bs = append(bs, binary{name, path})
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "wakeups-")
		if err != nil {
			return err
		}
		*dir = d
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wakeups: logs in %s\n", *dir)
	addrs := strings.Split(*redis, ",")
	results := map[string][]phaseCount{} // binary -> phases of every round
	for r := range *rounds {
		for k := range bs {
			b := bs[(k+r)%len(bs)]
			pcs, err := measure(b, r, r*len(bs)+k, addrs, *msgs, *pages, *conc, *dir, *trace)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", b.name, r+1, err)
			}
			for _, p := range pcs {
				fmt.Fprintf(os.Stderr, "  round %d %-6s %s\n", r+1, b.name, p)
			}
			results[b.name] = append(results[b.name], pcs...)
		}
	}
	report(os.Stdout, bs, results, *conc)
	return nil
}

// phaseCount is what one phase cost, per operation (message or page).
type phaseCount struct {
	phase                string
	ops                  int
	reads, calls         float64 // on the primaries
	replCalls, replBytes float64 // what the primaries sent their replicas
	replReads            float64 // reads on the replicas
	smtpW, redisW, logW  float64 // node write syscalls
	httpW, otherW        float64
	errs                 int
	wall                 float64 // µs per operation (noisy on a busy machine)
}

func (p phaseCount) String() string {
	return fmt.Sprintf("%-8s reads %.2f cmds %.2f repl-cmds %.2f repl-B %.0f | writes smtp %.2f redis %.2f log %.2f http %.2f (errors %d)",
		p.phase, p.reads, p.calls, p.replCalls, p.replBytes, p.smtpW, p.redisW, p.logW, p.httpW, p.errs)
}

// measure starts b, runs the three phases and returns their counts.
func measure(b binary, round, index int, addrs []string, msgs, pages, conc int, dir string, trace bool) ([]phaseCount, error) {
	// A prefix of its own per run: inboxes of an earlier run still hold
	// their clients' active slots.
	tag := fmt.Sprintf("wk%s%d%s", runID, round, strings.NewReplacer("+", "", "-", "").Replace(b.name))
	n, err := startNode(b, tag, addrs, dir, trace)
	if err != nil {
		return nil, err
	}
	defer n.stop()
	api := "http://" + n.http + "/v1"
	hc := load.NewHTTPClient(conc)
	// Fresh client addresses per node: every limit stays at its default.
	base := index * 8192
	var boxes []load.Inbox
	for i := range 8 {
		box, err := load.OpenInbox(hc, api, load.ClientIP(base, 4000+i))
		if err != nil {
			return nil, err
		}
		boxes = append(boxes, box)
	}
	rcpts := make([]string, len(boxes))
	for i, b := range boxes {
		rcpts[i] = b.Address
	}
	// 20 messages in the first inbox for the list phase (and warm-up).
	src, err := load.NewSourcePool(fmt.Sprintf("127.%d.0.0/16", 100+index%150))
	if err != nil {
		return nil, err
	}
	if r := (load.SMTPLoad{Addr: n.smtp, Rcpts: rcpts[:1], Conns: 1, Msgs: 20, PerConn: 20, Size: 2048, Sources: src.Offset(60000),
		Subject: func(i int) string { return tag + "-fill-" + strconv.Itoa(i) }}).Run(context.Background()); r.Errors > 0 {
		return nil, fmt.Errorf("fill: %d errors: %s", r.Errors, r.FirstErr)
	}
	time.Sleep(200 * time.Millisecond)
	var out []phaseCount
	phase := func(name string, ops int, fn func() int) {
		before := snap(addrs)
		t0 := time.Now()
		errs := fn()
		t1 := time.Now()
		time.Sleep(100 * time.Millisecond) // replicas' acks and late writes land
		after := snap(addrs)
		pc := diff(name, ops, before, after)
		pc.errs = errs
		pc.wall = float64(t1.Sub(t0).Microseconds()) / float64(ops)
		n.mark(name, t0, t1)
		out = append(out, pc)
	}
	smtp := func(perConn, offset int) func() int {
		return func() int {
			r := load.SMTPLoad{Addr: n.smtp, Rcpts: rcpts, Conns: conc, Msgs: msgs, PerConn: perConn, Size: 2048,
				Sources: src.Offset(offset), Timeout: 10 * time.Second,
				Subject: func(i int) string { return fmt.Sprintf("%s-%d-%d", tag, perConn, i) }}.Run(context.Background())
			if r.Errors > 0 {
				fmt.Fprintf(os.Stderr, "  %s: %d errors, the first: %s\n", tag, r.Errors, r.FirstErr)
			}
			return r.Errors
		}
	}
	phase("smtp 1", msgs, smtp(1, 0))
	phase("smtp 100", msgs, smtp(100, 20000))
	phase("list", pages, func() int {
		var errs atomic.Int64
		_ = load.Parallel(pages, conc, func(i int) error {
			// A client per page: 8 requests a second per client.
			if err := load.Get(hc, api+"/messages", load.ClientIP(base, i), boxes[0].Cookie, nil); err != nil {
				errs.Add(1)
			}
			return nil
		})
		return int(errs.Load())
	})
	if err := n.stop(); err != nil {
		return nil, err
	}
	if trace {
		if err := n.countWrites(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// node is a running `mayfly all`, maybe under strace.
type node struct {
	cmd        *exec.Cmd
	trace      string
	http, smtp string
	marks      []mark
	done       chan error
	once       sync.Once
	err        error
}

type mark struct {
	name   string
	t0, t1 time.Time
}

func (n *node) mark(name string, t0, t1 time.Time) { n.marks = append(n.marks, mark{name, t0, t1}) }

func startNode(b binary, tag string, addrs []string, dir string, trace bool) (*node, error) {
	n := &node{done: make(chan error, 1)}
	args := []string{"all"}
	bin := b.path
	if trace {
		n.trace = filepath.Join(dir, tag+".strace")
		// -ttt: a timestamp on each line, to split the trace by phase;
		// -s 4: the first bytes tell an SMTP reply from a Redis command.
		args = append([]string{"-f", "-qq", "-ttt", "-s", "4", "-e", "trace=write,writev,sendto,sendmsg",
			"-e", "signal=none", "-o", n.trace, b.path}, args...)
		bin = "strace"
	}
	logf, err := os.Create(filepath.Join(dir, tag+".log"))
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Env = append(os.Environ(),
		"MAYFLY_REDIS_ADDRS="+strings.Join(addrs, ","),
		"MAYFLY_REDIS_PREFIX="+tag,
		"MAYFLY_HTTP_ADDR=127.0.0.1:0", "MAYFLY_SMTP_ADDR=127.0.0.1:0", "MAYFLY_ADMIN_ADDR=127.0.0.1:0",
		"MAYFLY_TRUSTED_PROXIES=127.0.0.1/32", "MAYFLY_COOKIE_SECURE=false", "MAYFLY_DRAIN_DELAY=0s")
	n.cmd.Stdout = logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(io.TeeReader(stderr, logf))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Kind, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				switch line.Kind {
				case "http":
					n.http = line.Addr
				case "smtp":
					n.smtp = line.Addr
				}
				if n.http != "" && n.smtp != "" && ready != nil {
					close(ready)
					ready = nil
				}
			}
		}
		n.done <- n.cmd.Wait()
	}()
	select {
	case <-ready:
		return n, nil
	case err := <-n.done:
		return nil, fmt.Errorf("%s exited before listening: %v (see %s.log)", b.name, err, tag)
	case <-time.After(30 * time.Second):
		n.stop()
		return nil, fmt.Errorf("%s: not listening after 30 s", b.name)
	}
}

// stop ends the node (SIGTERM to it, under strace to strace's child) and
// waits.
func (n *node) stop() error {
	n.once.Do(func() {
		pid := n.cmd.Process.Pid
		if n.trace != "" {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
			if child, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pid = child
			}
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			_ = n.cmd.Process.Kill()
			n.err = errors.New("node did not stop within 30 s")
		}
	})
	return n.err
}

// countWrites reads the trace and adds each phase's write syscalls, per
// operation, by what the first bytes say they carry.
func (n *node) countWrites(pcs []phaseCount) error {
	f, err := os.Open(n.trace)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// "<pid> <sec.usec> write(12, \"220 \"..., 40) = 40"
		_, rest, _ := strings.Cut(sc.Text(), " ")
		stamp, call, ok := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if !ok {
			continue
		}
		ts, err := strconv.ParseFloat(stamp, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, int64(ts*1e9))
		for i, m := range n.marks {
			if at.Before(m.t0) || at.After(m.t1) {
				continue
			}
			p := &pcs[i]
			w := 1 / float64(p.ops)
			switch {
			case strings.Contains(call, "resumed>"), strings.Contains(call, "= -1 E"):
			case strings.Contains(call, `"*`), strings.Contains(call, `[{iov_base="*`):
				p.redisW += w
			case strings.Contains(call, `"{`):
				p.logW += w
			case strings.Contains(call, `"HTTP`):
				p.httpW += w
			case smtpReply(call):
				p.smtpW += w
			default:
				p.otherW += w
			}
		}
	}
	return sc.Err()
}

// smtpReply reports whether a traced write starts with a reply code.
func smtpReply(call string) bool {
	i := strings.IndexByte(call, '"')
	if i < 0 || len(call) < i+4 {
		return false
	}
	c := call[i+1 : i+4]
	return c[0] >= '2' && c[0] <= '5' && c[1] >= '0' && c[1] <= '9' && c[2] >= '0' && c[2] <= '9'
}

// redisSnap is one node's counters.
type redisSnap struct {
	primary           bool
	reads, replOffset float64
	calls             float64 // every command but the tool's own INFO
}

func snap(addrs []string) []redisSnap {
	out := make([]redisSnap, len(addrs))
	for i, addr := range addrs {
		h, port, _ := strings.Cut(addr, ":")
		raw, err := exec.Command("redis-cli", "-h", h, "-p", port, "INFO", "stats", "replication", "commandstats").Output()
		if err != nil {
			continue
		}
		s := redisSnap{}
		for line := range strings.SplitSeq(string(raw), "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			f, _ := strconv.ParseFloat(v, 64)
			switch {
			case k == "total_reads_processed":
				s.reads = f
			case k == "master_repl_offset":
				s.replOffset = f
			case k == "role":
				s.primary = v == "master"
			case strings.HasPrefix(k, "cmdstat_"):
				name := strings.TrimPrefix(k, "cmdstat_")
				// Not the load's: this tool's INFO, the replicas' acks,
				// the cluster's own upkeep.
				if name == "info" || name == "replconf" || name == "ping" || strings.HasPrefix(name, "cluster") {
					continue
				}
				for kv := range strings.SplitSeq(v, ",") {
					if field, val, _ := strings.Cut(kv, "="); field == "calls" {
						n, _ := strconv.ParseFloat(val, 64)
						s.calls += n
					}
				}
			}
		}
		out[i] = s
	}
	return out
}

func diff(name string, ops int, before, after []redisSnap) phaseCount {
	p := phaseCount{phase: name, ops: ops}
	w := 1 / float64(ops)
	for i := range after {
		a, b := after[i], before[i]
		if a.primary {
			p.reads += (a.reads - b.reads - 1) * w // less this tool's INFO
			p.calls += (a.calls - b.calls) * w
			p.replBytes += (a.replOffset - b.replOffset) * w
		} else {
			p.replReads += (a.reads - b.reads - 1) * w
			p.replCalls += (a.calls - b.calls) * w
		}
	}
	return p
}

// report prints the median of each binary's rounds per phase, as a
// markdown table.
func report(w io.Writer, bs []binary, results map[string][]phaseCount, conc int) {
	fmt.Fprintf(w, "\nper message / per page, c=%d, median of rounds\n\n", conc)
	fmt.Fprintln(w, "| phase | binary | Redis reads (primaries) | commands | replicated commands | replicated bytes | replica reads | SMTP writes | Redis writes | log writes | HTTP writes | wall µs (noisy) | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, ph := range []string{"smtp 1", "smtp 100", "list"} {
		for _, b := range bs {
			var rows []phaseCount
			for _, p := range results[b.name] {
				if p.phase == ph {
					rows = append(rows, p)
				}
			}
			med := func(get func(phaseCount) float64) string {
				vs := make([]float64, len(rows))
				for i, r := range rows {
					vs[i] = get(r)
				}
				sort.Float64s(vs)
				if len(vs) == 0 {
					return "-"
				}
				return strconv.FormatFloat(vs[len(vs)/2], 'f', 2, 64)
			}
			errs := 0
			for _, r := range rows {
				errs += r.errs
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", ph, b.name,
				med(func(p phaseCount) float64 { return p.reads }),
				med(func(p phaseCount) float64 { return p.calls }),
				med(func(p phaseCount) float64 { return p.replCalls }),
				med(func(p phaseCount) float64 { return p.replBytes }),
				med(func(p phaseCount) float64 { return p.replReads }),
				med(func(p phaseCount) float64 { return p.smtpW }),
				med(func(p phaseCount) float64 { return p.redisW }),
				med(func(p phaseCount) float64 { return p.logW }),
				med(func(p phaseCount) float64 { return p.httpW }),
				strings.TrimSuffix(med(func(p phaseCount) float64 { return p.wall }), ".00"),
				errs)
		}
	}
}

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// The per-request budgets of bench/README.md: what one request (A, B) or one
// message (D) costs the Mayfly node and the Redis servers, measured on every
// run, beside the ratio, so a run shows where it stands even where the ratio
// is noisy.
//
//   - node CPU: the node process's user+system time (/proc/<pid>/stat, all
//     its threads) over the run, divided by the operations done;
//   - Redis CPU: used_cpu_user+used_cpu_sys of every cluster node (INFO cpu)
//     over the run, divided likewise: commands, Lua and the network work for
//     them;
//   - parse (D): the ingest node's parse stage (MIME and HTML sanitizing,
//     mayfly_smtp_stage_duration_seconds{stage="parse"}) per message. It is
//     wall time: with more connections than cores it counts the waits for a
//     core too, so its budget is judged at one connection (c=1), and
//     `go test -bench BenchmarkParse ./ingest` gives the CPU cost alone.

// meter is a reading taken before a run.
type meter struct {
	node  float64 // seconds of CPU
	redis []redisSnap
	parse [2]float64 // sum (s), count
}

// readMeter reads p's CPU, the counters of the Redis nodes st runs on and
// p's parse-stage totals.
func (b *bench) readMeter(p *proc, st *stack) meter {
	m := meter{node: procCPU(p.pid()), redis: snapRedis(st.redis)}
	m.parse = stageTotals(p, "parse")
	return m
}

// The budgets of bench/README.md: per GET /messages of A, and per message of
// D at one message per connection; the same on the replicated cluster.
var budgets = map[string]float64{
	"A node CPU per op":                     45,
	"A Redis CPU per op":                    15,
	"D 1/conn c=32 node CPU per op":         150,
	"D 1/conn c=32 Redis CPU per op":        50,
	"D 1/conn c=1 parse + sanitize per msg": 60,
	"AR node CPU per op":                    45,
	"AR Redis CPU per op":                   15,
	"DR 1/conn c=32 node CPU per op":        150,
	"DR 1/conn c=32 Redis CPU per op":       50,
}

// budget records the per-operation figures of a run of ops operations
// started at before; table also records the run's Redis budget per node
// and per command (redisstats.go).
func (b *bench) budget(st *stack, scenario, prefix string, p *proc, before meter, ops int, parse, table bool) {
	if ops <= 0 {
		return
	}
	after := b.readMeter(p, st)
	n := float64(ops)
	add := func(name string, v float64) {
		f := b.fig(scenario, prefix+name, "µs")
		if max, ok := budgets[scenario+" "+prefix+name]; ok {
			f.atMost(max)
		}
		f.add(v)
	}
	add("node CPU per op", (after.node-before.node)/n*1e6)
	add("Redis CPU per op", (totalCPU(after.redis)-totalCPU(before.redis))/n*1e6)
	if table {
		label := strings.TrimSpace(scenario + " " + prefix)
		b.recordOps(scenario, label, st.shape, perOp(before.redis, after.redis, ops))
	}
	if c := after.parse[1] - before.parse[1]; parse && c > 0 {
		add("parse + sanitize per msg", (after.parse[0]-before.parse[0])/c*1e6)
	}
}

// procCPU is the CPU time of process pid in seconds (clock ticks of 10 ms).
func procCPU(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// stageTotals reads the sum and count of one stage of the SMTP stage
// histogram from p's /metrics; zero when p has none (an edge).
func stageTotals(p *proc, stage string) [2]float64 {
	var out [2]float64
	resp, err := http.Get("http://" + p.addrs["admin"] + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sum := fmt.Sprintf(`mayfly_smtp_stage_duration_seconds_sum{stage=%q} `, stage)
	count := fmt.Sprintf(`mayfly_smtp_stage_duration_seconds_count{stage=%q} `, stage)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for i, prefix := range []string{sum, count} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}

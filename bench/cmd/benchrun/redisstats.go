package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// The Redis budget of an operation, from Redis itself (bench/README.md,
// "The budgets"): for a measured run, each node's process CPU (INFO cpu),
// its socket reads and writes (INFO stats total_reads_processed and
// total_writes_processed: a read is one round trip a client made, or fewer
// when a client batched several requests into one write), and the calls of
// every command (INFO commandstats; the commands scripts run are counted
// too). Deltas over the run are divided by the operations done.
//
// commandstats' usec is wall time around each call: on a loaded machine it
// inflates several times, so the tables rank commands by it and never price
// them with it. What an operation costs is the CPU row.

// redisSnap is one Redis node's counters at one moment.
type redisSnap struct {
	addr, role    string
	cpu           float64 // seconds
	reads, writes float64
	calls, usec   map[string]float64
}

// snapRedis reads the counters of every node in addrs.
func snapRedis(addrs []string) []redisSnap {
	out := make([]redisSnap, len(addrs))
	for i, addr := range addrs {
		s := redisSnap{addr: addr, calls: map[string]float64{}, usec: map[string]float64{}}
		h, port, _ := strings.Cut(addr, ":")
		raw, err := exec.Command("redis-cli", "-h", h, "-p", port, "INFO", "cpu", "stats", "replication", "commandstats").Output()
		if err == nil {
			for line := range strings.SplitSeq(string(raw), "\n") {
				k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
				f, _ := strconv.ParseFloat(v, 64)
				switch {
				case k == "used_cpu_user" || k == "used_cpu_sys":
					s.cpu += f
				case k == "total_reads_processed":
					s.reads = f
				case k == "total_writes_processed":
					s.writes = f
				case k == "role":
					s.role = map[string]string{"master": "primary", "slave": "replica"}[v]
				case strings.HasPrefix(k, "cmdstat_"):
					name := strings.ReplaceAll(strings.TrimPrefix(k, "cmdstat_"), "|", " ")
					for kv := range strings.SplitSeq(v, ",") {
						field, val, _ := strings.Cut(kv, "=")
						n, _ := strconv.ParseFloat(val, 64)
						switch field {
						case "calls":
							s.calls[name] = n
						case "usec":
							s.usec[name] = n
						}
					}
				}
			}
		}
		out[i] = s
	}
	return out
}

func totalCPU(snaps []redisSnap) float64 {
	t := 0.0
	for _, s := range snaps {
		t += s.cpu
	}
	return t
}

// opRun is one run's Redis budget per operation.
type opRun struct {
	nodes         []redisSnap // per node, per op: cpu in µs, reads, writes, calls
	reads, writes float64
	calls, usec   map[string]float64 // calls per op; usec per call (primaries)
	replicated    float64            // commands per op the replicas ran (the primaries' effects)
}

// perOp turns two snapshots into a per-operation budget.
func perOp(before, after []redisSnap, ops int) opRun {
	n := float64(ops)
	r := opRun{calls: map[string]float64{}, usec: map[string]float64{}}
	totalUsec := map[string]float64{}
	for i := range after {
		a, b := after[i], before[i]
		node := redisSnap{addr: a.addr, role: a.role, cpu: (a.cpu - b.cpu) / n * 1e6,
			reads: (a.reads - b.reads) / n, writes: (a.writes - b.writes) / n}
		r.reads += node.reads
		r.writes += node.writes
		r.nodes = append(r.nodes, node)
		if a.role == "replica" {
			for cmd, c := range a.calls {
				r.replicated += (c - b.calls[cmd]) / n
			}
			continue
		}
		for cmd, c := range a.calls {
			if d := c - b.calls[cmd]; d > 0 {
				r.calls[cmd] += d / n
				totalUsec[cmd] += a.usec[cmd] - b.usec[cmd]
			}
		}
	}
	for cmd, u := range totalUsec {
		r.usec[cmd] = u / (r.calls[cmd] * n)
	}
	return r
}

// opTable is the Redis budget of one kind of operation over its runs.
type opTable struct {
	scenario, label, shape string
	runs                   []opRun
}

// recordOps adds a run's budget to the table of scenario/label.
func (b *bench) recordOps(scenario, label, shape string, r opRun) {
	for _, t := range b.opTables {
		if t.scenario == scenario && t.label == label {
			t.runs = append(t.runs, r)
			return
		}
	}
	b.opTables = append(b.opTables, &opTable{scenario: scenario, label: label, shape: shape, runs: []opRun{r}})
}

func medianOf(vs []float64) float64 {
	f := figure{runs: vs}
	return f.median()
}

// markdown renders the table: CPU and socket work per node, then the
// commands by their share of Redis's (wall) command time.
func (t *opTable) markdown() string {
	var s strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&s, format, args...) }
	w("\n**Redis per operation, %s** (%s; median of %d runs)\n\n", t.label, t.shape, len(t.runs))
	nodes := t.runs[0].nodes
	w("| | ")
	for _, n := range nodes {
		w("%s %s | ", n.addr, n.role)
	}
	w("all |\n|---|")
	for range nodes {
		w("---:|")
	}
	w("---:|\n")
	row := func(name string, get func(redisSnap) float64, total func(opRun) float64, format func(float64) string) {
		w("| %s | ", name)
		for i := range nodes {
			vs := make([]float64, len(t.runs))
			for j, r := range t.runs {
				if i < len(r.nodes) {
					vs[j] = get(r.nodes[i])
				}
			}
			w("%s | ", format(medianOf(vs)))
		}
		vs := make([]float64, len(t.runs))
		for j, r := range t.runs {
			vs[j] = total(r)
		}
		w("%s |\n", format(medianOf(vs)))
	}
	sumCPU := func(r opRun) float64 {
		c := 0.0
		for _, n := range r.nodes {
			c += n.cpu
		}
		return c
	}
	row("process CPU, µs", func(n redisSnap) float64 { return n.cpu }, sumCPU, num)
	row("socket reads (≈ round trips)", func(n redisSnap) float64 { return n.reads }, func(r opRun) float64 { return r.reads }, num)
	row("socket writes", func(n redisSnap) float64 { return n.writes }, func(r opRun) float64 { return r.writes }, num)
	// Commands: every command seen in a run, by calls per op.
	var cmds []string
	for _, r := range t.runs {
		for c := range r.calls {
			if !slices.Contains(cmds, c) {
				cmds = append(cmds, c)
			}
		}
	}
	calls := map[string]float64{}
	usec := map[string]float64{}
	total := 0.0
	for _, c := range cmds {
		cs, us := make([]float64, len(t.runs)), make([]float64, len(t.runs))
		for j, r := range t.runs {
			cs[j], us[j] = r.calls[c], r.usec[c]
		}
		calls[c], usec[c] = medianOf(cs), medianOf(us)
		total += calls[c]
	}
	slices.SortFunc(cmds, func(a, b string) int {
		return cmpFloat(calls[b]*usec[b], calls[a]*usec[a])
	})
	// EXEC and EVALSHA's time includes the commands they ran, which are
	// listed too: the shares rank, they do not add up to a cost.
	w("\n| command | calls per op | wall µs per call (ranks only) | share of command time |\n|---|---:|---:|---:|\n")
	wall := 0.0
	for _, c := range cmds {
		wall += calls[c] * usec[c]
	}
	for _, c := range cmds {
		if calls[c] < 0.001 {
			continue
		}
		share := 0.0
		if wall > 0 {
			share = calls[c] * usec[c] / wall * 100
		}
		w("| `%s` | %s | %s | %.0f %% |\n", c, num(calls[c]), num(usec[c]), share)
	}
	w("| all | %s | | |\n", num(total))
	if rep := t.runs[0].replicated; rep > 0 {
		vs := make([]float64, len(t.runs))
		for j, r := range t.runs {
			vs[j] = r.replicated
		}
		w("\nThe commands are the primaries'; the replicas ran %s commands per op (the writes' effects, replicated).\n", num(medianOf(vs)))
	}
	return s.String()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

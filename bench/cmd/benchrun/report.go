package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mayfly/mayfly/bench/internal/results"
)

// figure is one measured quantity: a value per run, reported as the median.
type figure struct {
	scenario, name, unit string
	runs                 []float64
	target               string             // e.g. "≥ 0.5"; empty: no target
	met                  func(float64) bool // nil: no target
	// worst: judge by the worst run instead of the median (error counts and
	// the exact limits: one bad run is a failure).
	worst func([]float64) float64
	// correctness: an error count or a limit, which must hold at any scale;
	// the others are performance targets, judged at full scale only.
	correctness bool
}

func (b *bench) fig(scenario, name, unit string) *figure {
	for _, f := range b.figures {
		if f.scenario == scenario && f.name == name {
			return f
		}
	}
	f := &figure{scenario: scenario, name: name, unit: unit}
	b.figures = append(b.figures, f)
	return f
}

func (f *figure) add(v float64) *figure { f.runs = append(f.runs, v); return f }

func (f *figure) median() float64 {
	if len(f.runs) == 0 {
		return 0
	}
	s := slices.Clone(f.runs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (f *figure) judged() float64 {
	if f.worst != nil {
		return f.worst(f.runs)
	}
	return f.median()
}

// atLeast, atMost and exactly set a target on the median.
func (f *figure) atLeast(v float64) *figure {
	f.target, f.met = "≥ "+num(v), func(x float64) bool { return x >= v }
	return f
}

func (f *figure) atMost(v float64) *figure {
	f.target, f.met = "≤ "+num(v), func(x float64) bool { return x <= v }
	return f
}

// exactly judges every run, not the median.
func (f *figure) exactly(v float64) *figure {
	f.target, f.met = "= "+num(v)+" (every run)", func(x float64) bool { return x == v }
	f.correctness = true
	f.worst = func(runs []float64) float64 {
		for _, r := range runs {
			if r != v {
				return r
			}
		}
		return v
	}
	return f
}

// zeroErrors is the target of every error count.
func (f *figure) zeroErrors() *figure { return f.exactly(0) }

// missed lists the targets not met; correctnessOnly skips performance ones.
func (b *bench) missed(correctnessOnly bool) []string {
	var out []string
	for _, f := range b.figures {
		if correctnessOnly && !f.correctness {
			continue
		}
		if f.met != nil && len(f.runs) > 0 && !f.met(f.judged()) {
			out = append(out, fmt.Sprintf("%s %s = %s, target %s", f.scenario, f.name, num(f.judged()), f.target))
		}
	}
	return out
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15 && v > -1e15:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

type machine struct {
	cpus                         int
	cpuModel, memory, kernel, os string
	goVersion, redis, k6, vegeta string
}

func (b *bench) machineInfo(ctx context.Context) machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version()}
	if s, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(s), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.cpuModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if s, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(s), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if s, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(s))
	}
	if s, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.SplitSeq(string(s), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.os = strings.Trim(v, `"`)
			}
		}
	}
	if info, err := b.rdb.Do(ctx, b.rdb.B().Info().Section("server").Build()).ToString(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.redis = v
			}
		}
	}
	if out, err := exec.Command(b.tool("k6"), "version").Output(); err == nil {
		m.k6 = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	// vegeta built with `go build` has no version of its own to print: its
	// module version is in the binary's build info.
	if bi, err := buildinfo.ReadFile(b.tool("vegeta")); err == nil {
		m.vegeta = bi.Main.Path + " " + bi.Main.Version
	}
	return m
}

var scenarioTitles = map[string]string{
	"R":   "References: redis-benchmark against one cluster node",
	"A":   "A. Read hot path: GET /v1/messages (20 messages), 32 clients",
	"B":   "B. Read one message: GET /v1/messages/{id} (50 KiB HTML), 32 clients",
	"C":   "C. Full flow (k6): create → select → SMTP → event → list → read → delete",
	"AR":  "AR. A on 3 primaries + 3 replicas (default durability)",
	"RA":  "RA. The Redis floor: A's and D's Redis calls without HTTP or SMTP, 32 goroutines",
	"RAR": "RAR. The Redis floor on 3 primaries + 3 replicas (default durability)",
	"D":   "D. SMTP ingest: 2 KiB multipart messages",
	"DR":  "DR. D on 3 primaries + 3 replicas (default durability: WAIT on the delivery path)",
	"E":   "E. Event latency: SMTP 250 → message.received on the stream",
	"F":   "F. Connection scale: idle event streams on one edge node",
	"G":   "G. Limits under attack",
	"M":   "Memory model: Redis MEMORY USAGE over a sample",
}

// sections is the run's report, one section of RESULTS.md per scenario
// (results.ReplaceFile replaces each) after "bench": the machine, the
// targets and the run's notes.
func (b *bench) sections(elapsed time.Duration) []results.Section {
	var out []results.Section
	var s strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&s, format, args...) }
	w("## The last `make bench` run\n\n")
	w("Written by `make bench` (bench/cmd/benchrun, scale `%s`) on %s in %s. ", b.sc.name,
		time.Now().UTC().Format("2006-01-02 15:04 MST"), elapsed.Round(time.Second))
	w("Every figure is the median of %d runs (each run's value is listed); latencies are p50/p99 in ms as the load tool measured them. ", b.sc.runs)
	w("The load tools, the reference servers, one `mayfly edge`, one `mayfly ingest` and a 3-master Redis Cluster all share this machine")
	if len(b.redisR) > 0 {
		w(", and AR and DR run another edge and ingest on a second cluster of 3 primaries with a replica each")
	}
	w(". ")
	w("What each scenario does, and what the figures mean, is in [README.md](README.md).\n\n")
	w("### Machine\n\n| | |\n|---|---|\n")
	w("| CPU | %d × %s |\n| Memory | %s |\n| OS | %s, kernel %s |\n", b.info.cpus, b.info.cpuModel, b.info.memory, b.info.os, b.info.kernel)
	shapes := "3 masters, no replicas"
	if len(b.redisR) > 0 {
		shapes += "; AR, DR: 3 masters + 3 replicas"
	}
	w("| Go | %s |\n| Redis | %s (%s) |\n| k6 | %s |\n| vegeta | %s |\n", b.info.goVersion, b.info.redis, shapes, b.info.k6, b.info.vegeta)
	for _, p := range b.peers {
		w("| %s | %s |\n", p.name, p.version)
	}
	w("\n")

	w("### Targets\n\n| | figure | result | target | met |\n|---|---|---:|---|---|\n")
	for _, f := range b.figures {
		if f.met == nil || len(f.runs) == 0 {
			continue
		}
		mark := "yes"
		if !f.met(f.judged()) {
			mark = "**NO**"
		}
		w("| %s | %s | %s %s | %s | %s |\n", f.scenario, f.name, num(f.judged()), f.unit, f.target, mark)
	}
	if len(b.notes) > 0 {
		w("\n### Notes from this run\n\n")
		for _, n := range b.notes {
			w("- %s\n", n)
		}
	}
	out = append(out, results.Section{Name: "bench", Body: s.String()})
	for _, sc := range []string{"R", "A", "B", "AR", "RA", "RAR", "C", "D", "DR", "E", "F", "F50", "G", "M"} {
		var fs []*figure
		for _, f := range b.figures {
			if f.scenario == sc {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			continue
		}
		s.Reset()
		title := scenarioTitles[sc]
		if title == "" {
			title = sc
		}
		w("## %s\n\n| figure | median | runs | unit |\n|---|---:|---|---|\n", title)
		for _, f := range fs {
			runs := make([]string, len(f.runs))
			for i, r := range f.runs {
				runs[i] = num(r)
			}
			w("| %s | %s | %s | %s |\n", f.name, num(f.median()), strings.Join(runs, ", "), f.unit)
		}
		for _, t := range b.opTables {
			if t.scenario == sc {
				w("%s", t.markdown())
			}
		}
		out = append(out, results.Section{Name: sc, Body: s.String()})
	}
	return out
}

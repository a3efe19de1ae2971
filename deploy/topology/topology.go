// Package topology starts Mayfly's local production topology
// (deploy/topology.sh: a 3+3 Redis Cluster, 2 edge and 2 ingest nodes,
// haproxy in front) for tests and failover drills, and gives them handles on
// its processes. It is test support: nothing in the service imports it.
package topology

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Topology is one running topology.
type Topology struct {
	Dir        string   // state dir: logs, topology.env
	HTTPURL    string   // the API through haproxy, ending in /v1
	SMTPAddr   string   // SMTP through haproxy
	RedisAddrs []string // every Redis node
	Edges      []Node
	Ingests    []Node
	HAProxyPID int
	// HAProxySock is haproxy's runtime API (stats socket, level admin).
	HAProxySock string

	t   testing.TB
	env []string // the MAYFLY_* settings of Start
}

// Node is one mayfly process.
type Node struct {
	PID   int
	Addr  string // HTTP (edge) or SMTP (ingest) listener
	Admin string // admin listener

	argv, env []string // of the process StopNode stopped, for StartNode
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// repoRoot is the repository, found from this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// build compiles cmd/mayfly once per test process (without -race: the
// topology runs it as a separate program).
func build() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mayfly-topology-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "mayfly")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/mayfly")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return binary, buildErr
}

// Binary is this tree's mayfly, built once per test process.
func Binary() (string, error) { return build() }

var (
	releasesMu sync.Mutex
	releases   = map[string]*release{}
)

type release struct {
	once sync.Once
	bin  string
	err  error
}

// BuildCommit compiles cmd/mayfly as it is at commit (a previous release)
// once per test process and returns the binary: a detached git worktree of
// this repository at that commit in a temp dir, built there with the shared
// module cache (so offline), and removed again; the binary stays in the temp
// dir.
func BuildCommit(commit string) (string, error) {
	releasesMu.Lock()
	r := releases[commit]
	if r == nil {
		r = &release{}
		releases[commit] = r
	}
	releasesMu.Unlock()
	r.once.Do(func() { r.bin, r.err = buildCommit(commit) })
	return r.bin, r.err
}

func buildCommit(commit string) (string, error) {
	dir, err := os.MkdirTemp("", "mayfly-release-bin-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	git := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git("worktree", "add", "--detach", src, commit); err != nil {
		return "", fmt.Errorf("%w (the repository's history must hold %s: not a shallow clone)", err, commit)
	}
	defer func() { _ = git("worktree", "remove", "--force", src) }()
	bin := filepath.Join(dir, "mayfly")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mayfly")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build at %s: %v\n%s", commit, err, out)
	}
	return bin, nil
}

// Start brings a topology up with env (MAYFLY_* settings for every node)
// added to the environment, and tears it down when the test ends.
func Start(t testing.TB, env ...string) *Topology {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return StartBinary(t, bin, env...)
}

// StartBinary is Start with every node running bin (another release's, from
// BuildCommit).
func StartBinary(t testing.TB, bin string, env ...string) *Topology {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "topology.sh"), "up")
	cmd.Env = append(append(os.Environ(), "MAYFLY_BIN="+bin), env...)
	if root := cgroupRoot(); root != "" {
		// Each Redis node in a cgroup of its own, for Partition.
		cmd.Env = append(cmd.Env, "MAYFLY_CLUSTER_CGROUP="+filepath.Join(root, fmt.Sprintf("mayfly-drill-%d-%d", os.Getpid(), time.Now().UnixNano())))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("topology.sh up: %v\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	tp := &Topology{Dir: dir, t: t, env: env}
	t.Cleanup(func() {
		if t.Failed() {
			tp.dumpLogs()
		}
		if out, err := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "topology.sh"), "down", dir).CombinedOutput(); err != nil {
			t.Errorf("topology.sh down: %v\n%s", err, out)
		}
	})
	if err := tp.load(); err != nil {
		t.Fatal(err)
	}
	return tp
}

func (tp *Topology) load() error {
	f, err := os.Open(filepath.Join(tp.Dir, "topology.env"))
	if err != nil {
		return err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	tp.HTTPURL, tp.SMTPAddr = kv["HTTP_URL"], kv["SMTP_ADDR"]
	tp.RedisAddrs = strings.Split(kv["REDIS_ADDRS"], ",")
	tp.HAProxyPID, _ = strconv.Atoi(kv["HAPROXY_PID"])
	tp.HAProxySock = kv["HAPROXY_SOCKET"]
	for i := 1; i <= 2; i++ {
		n := strconv.Itoa(i)
		pe, _ := strconv.Atoi(kv["EDGE"+n+"_PID"])
		pi, _ := strconv.Atoi(kv["INGEST"+n+"_PID"])
		tp.Edges = append(tp.Edges, Node{PID: pe, Addr: kv["EDGE"+n+"_HTTP"], Admin: kv["EDGE"+n+"_ADMIN"]})
		tp.Ingests = append(tp.Ingests, Node{PID: pi, Addr: kv["INGEST"+n+"_SMTP"], Admin: kv["INGEST"+n+"_ADMIN"]})
	}
	if tp.HTTPURL == "" || tp.SMTPAddr == "" || len(tp.RedisAddrs) < 6 || len(tp.RedisAddrs)%3 != 0 || tp.Edges[1].PID == 0 || tp.Ingests[1].PID == 0 {
		return fmt.Errorf("topology.env incomplete: %v", kv)
	}
	return nil
}

// Restart stops the node kind ("edge" or "ingest") number i (0 or 1, as in
// Edges and Ingests) as a rollout does (SIGTERM, and it drains), and starts
// bin in its place on the same addresses, so haproxy keeps it as a backend
// (topology.sh restart); env is added to Start's settings. It returns when
// the new process is ready (its /readyz answers 200), with Edges or Ingests
// naming it.
func (tp *Topology) Restart(kind string, i int, bin string, env ...string) {
	tp.t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "topology.sh"), "restart", tp.Dir, kind, strconv.Itoa(i+1))
	cmd.Env = append(append(append(os.Environ(), tp.env...), env...), "MAYFLY_BIN="+bin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tp.t.Fatalf("topology.sh restart %s %d: %v\n%s", kind, i+1, err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		tp.t.Fatalf("topology.sh restart %s %d printed %q, not a process id", kind, i+1, out)
	}
	// Only the PID changes: the rest of the topology stays as it is, for
	// the load that goes on reading it.
	if kind == "edge" {
		tp.Edges[i].PID = pid
	} else {
		tp.Ingests[i].PID = pid
	}
}

// Primaries returns the addresses of the Redis nodes that serve slots, as a
// live node sees them.
func (tp *Topology) Primaries() []string {
	tp.t.Helper()
	for _, a := range tp.RedisAddrs {
		nodes, err := tp.Redis(a, "CLUSTER", "NODES")
		if err != nil || strings.Contains(nodes, "Could not connect") {
			continue
		}
		var primaries []string
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) > 8 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
				addr, _, _ := strings.Cut(f[1], "@")
				primaries = append(primaries, addr)
			}
		}
		return primaries
	}
	tp.t.Fatal("no Redis node answers CLUSTER NODES")
	return nil
}

// Kill ends pid at once (SIGKILL), as a crash would.
func (tp *Topology) Kill(pid int) {
	tp.t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		tp.t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// Redis runs redis-cli against the node at addr.
func (tp *Topology) Redis(addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// RedisPID is the process id of the Redis node at addr.
func (tp *Topology) RedisPID(addr string) int {
	tp.t.Helper()
	out, err := tp.Redis(addr, "INFO", "server")
	if err != nil {
		tp.t.Fatalf("INFO %s: %v", addr, err)
	}
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	tp.t.Fatalf("no process_id from %s", addr)
	return 0
}

// PrimaryFor returns the address of the primary serving key's slot, and of
// one of its replicas ("" when it has none), as a live node sees them.
func (tp *Topology) PrimaryFor(key string) (primary, replica string) {
	tp.t.Helper()
	for _, a := range tp.RedisAddrs {
		slotOut, err := tp.Redis(a, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot, _ := strconv.Atoi(slotOut)
		nodes, err := tp.Redis(a, "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		var primaryID string
		byID := map[string][]string{}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) < 8 || strings.Contains(f[2], "fail") {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			if strings.Contains(f[2], "slave") {
				byID[f[3]] = append(byID[f[3]], addr)
				continue
			}
			for _, r := range f[8:] {
				lo, hi, found := strings.Cut(r, "-")
				if !found {
					hi = lo
				}
				l, _ := strconv.Atoi(lo)
				h, _ := strconv.Atoi(hi)
				if slot >= l && slot <= h {
					primary, primaryID = addr, f[0]
				}
			}
		}
		if primary != "" {
			if r := byID[primaryID]; len(r) > 0 {
				replica = r[0]
			}
			return primary, replica
		}
	}
	tp.t.Fatalf("no primary found for %q", key)
	return "", ""
}

// ReplicasOf returns the addresses of the replicas of the primary at addr,
// as it lists them in CLUSTER NODES.
func (tp *Topology) ReplicasOf(primary string) []string {
	tp.t.Helper()
	id, err := tp.Redis(primary, "CLUSTER", "MYID")
	if err != nil {
		tp.t.Fatalf("CLUSTER MYID %s: %v", primary, err)
	}
	nodes, err := tp.Redis(primary, "CLUSTER", "NODES")
	if err != nil {
		tp.t.Fatalf("CLUSTER NODES %s: %v", primary, err)
	}
	var replicas []string
	for line := range strings.Lines(nodes) {
		if f := strings.Fields(line); len(f) >= 4 && strings.Contains(f[2], "slave") && f[3] == id {
			a, _, _ := strings.Cut(f[1], "@")
			replicas = append(replicas, a)
		}
	}
	return replicas
}

// WaitClusterOK waits until every live node reports cluster_state:ok.
func (tp *Topology) WaitClusterOK(within time.Duration) {
	tp.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, live := true, 0
		for _, a := range tp.RedisAddrs {
			out, err := tp.Redis(a, "CLUSTER", "INFO")
			if err != nil || strings.Contains(out, "Could not connect") {
				continue // a killed node
			}
			live++
			if !strings.Contains(out, "cluster_state:ok") {
				ok = false
			}
		}
		if ok && live > 0 {
			return
		}
		if time.Now().After(deadline) {
			tp.t.Fatalf("cluster not ok after %v", within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Logs returns the log of one process of the topology ("edge1",
// "ingest2", "haproxy").
func (tp *Topology) Logs(name string) string {
	b, _ := os.ReadFile(filepath.Join(tp.Dir, name+".log"))
	return string(b)
}

func (tp *Topology) dumpLogs() {
	for _, n := range []string{"edge1", "edge2", "ingest1", "ingest2", "haproxy"} {
		lines := strings.Split(strings.TrimSpace(tp.Logs(n)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		tp.t.Logf("--- last lines of %s.log:\n%s", n, strings.Join(lines, "\n"))
	}
}

// cgroupRoot is the mount point of the cgroup v2 hierarchy when this process
// may create cgroups there (root), else "".
func cgroupRoot() string {
	if os.Geteuid() != 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "cgroup2" && strings.HasPrefix(f[3], "rw") {
			return f[1]
		}
	}
	return ""
}

// Partition cuts the Redis primary at addr off as a minority partition
// would, with iptables on lo, and leaves every client connection to it
// untouched (so Mayfly's nodes still reach the old primary, the dangerous
// case). Cut, in both directions:
//   - its cluster bus port: every link other nodes have open to it, and any
//     they open during the cut;
//   - every connection the node itself opened or opens (its outgoing bus
//     links, matched by its cgroup, which holds every socket it ever made);
//   - the replication link of each of its replicas (their connections to
//     its client port, matched by the replica's cgroup and conntrack'd, so
//     the primary's side of the stream is dropped too).
//
// It returns heal, which removes the cut; the test's cleanup heals too.
func (tp *Topology) Partition(addr string) (heal func()) {
	tp.t.Helper()
	cg := tp.redisCgroup()
	_, port, _ := strings.Cut(addr, ":")
	p, _ := strconv.Atoi(port)
	bus := strconv.Itoa(p + 10000)
	var replicaPorts []string
	for _, a := range tp.ReplicasOf(addr) {
		_, rp, _ := strings.Cut(a, ":")
		replicaPorts = append(replicaPorts, rp)
	}
	if len(replicaPorts) == 0 {
		tp.t.Fatalf("%s has no replica to cut it from", addr)
	}
	chain := "MFDRILL-" + port
	mark := fmt.Sprintf("0x%x", 0x4d460000|p&0xffff)
	rules := [][]string{
		{"-N", chain},
		{"-A", chain, "-p", "tcp", "--dport", bus, "-j", "DROP"},
		{"-A", chain, "-p", "tcp", "--sport", bus, "-j", "DROP"},
		{"-A", chain, "-m", "cgroup", "--path", cg + "/node-" + port, "-p", "tcp", "!", "--sport", port, "-j", "DROP"},
	}
	for _, rp := range replicaPorts {
		rules = append(rules, []string{"-A", chain, "-m", "cgroup", "--path", cg + "/node-" + rp, "-p", "tcp", "--dport", port, "-j", "CONNMARK", "--set-mark", mark})
	}
	return tp.cut(chain, mark, rules)
}

// cut adds rules (the first creates chain) and a last one dropping every
// connection marked mark, hooks chain into OUTPUT (every packet on lo passes
// there once, from its sender), and returns heal, which removes it all; the
// test's cleanup heals too.
func (tp *Topology) cut(chain, mark string, rules [][]string) (heal func()) {
	tp.t.Helper()
	rules = append(rules,
		[]string{"-A", chain, "-m", "connmark", "--mark", mark, "-j", "DROP"},
		[]string{"-I", "OUTPUT", "1", "-j", chain})
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, r := range [][]string{{"-D", "OUTPUT", "-j", chain}, {"-F", chain}, {"-X", chain}} {
				_ = exec.Command("iptables", append([]string{"-w"}, r...)...).Run()
			}
		})
	}
	tp.t.Cleanup(heal)
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w"}, r...)...).CombinedOutput(); err != nil {
			heal()
			tp.t.Fatalf("iptables %v: %v\n%s", r, err, out)
		}
	}
	return heal
}

// redisCgroup is the cgroup path (as iptables -m cgroup --path wants it)
// under which each Redis node of the topology runs in node-<port>.
func (tp *Topology) redisCgroup() string {
	tp.t.Helper()
	cgFile, err := os.ReadFile(filepath.Join(tp.Dir, "redis", "cgroup"))
	root := cgroupRoot()
	if err != nil || root == "" {
		tp.t.Fatalf("a partition needs root and a writable cgroup v2 hierarchy (the Redis nodes run without cgroups of their own): %v", err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(cgFile)), root)
}

// PartitionGroup splits the Redis nodes in two as a network partition
// would, with iptables on lo: the nodes at minority on one side, every
// other node of the cluster on the other. Nodes on one side keep every link
// among them (cluster bus, replication); every connection between the
// sides, whichever opened it, is dropped in both directions (the first
// packet a node sends on it, matched by the node's cgroup and the other
// node's ports, marks the connection for conntrack). Connections of
// clients (Mayfly's nodes, redis-cli) to any node are untouched.
//
// It returns heal, which removes the cut; the test's cleanup heals too.
func (tp *Topology) PartitionGroup(minority ...string) (heal func()) {
	tp.t.Helper()
	cg := tp.redisCgroup()
	inside := map[string]bool{}
	for _, a := range minority {
		inside[a] = true
	}
	_, first, _ := strings.Cut(minority[0], ":")
	p, _ := strconv.Atoi(first)
	chain := "MFDRILLG-" + first
	mark := fmt.Sprintf("0x%x", 0x4d470000|p&0xffff)
	rules := [][]string{{"-N", chain}}
	for _, from := range tp.RedisAddrs {
		for _, to := range tp.RedisAddrs {
			if inside[from] == inside[to] {
				continue
			}
			_, fromPort, _ := strings.Cut(from, ":")
			_, toPort, _ := strings.Cut(to, ":")
			n, _ := strconv.Atoi(toPort)
			for _, port := range []string{toPort, strconv.Itoa(n + 10000)} { // client port, bus
				rules = append(rules, []string{"-A", chain, "-m", "cgroup", "--path", cg + "/node-" + fromPort,
					"-p", "tcp", "--dport", port, "-j", "CONNMARK", "--set-mark", mark})
			}
		}
	}
	return tp.cut(chain, mark, rules)
}

// DurableWrites sums mayfly_durable_writes_total{outcome} over the ingest
// nodes: outcome → count.
func (tp *Topology) DurableWrites() map[string]float64 {
	tp.t.Helper()
	out := map[string]float64{}
	for _, n := range tp.Ingests {
		res, err := http.Get("http://" + n.Admin + "/metrics")
		if err != nil {
			tp.t.Fatalf("metrics of %s: %v", n.Admin, err)
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), `mayfly_durable_writes_total{outcome="`)
			if !ok {
				continue
			}
			outcome, value, _ := strings.Cut(rest, `"} `)
			v, _ := strconv.ParseFloat(value, 64)
			out[outcome] += v
		}
		res.Body.Close()
	}
	return out
}

// EdgeCounter sums the counter name (a series without labels) over the edge
// nodes' admin listeners that answer, and says how many did not (an edge a
// drill killed: its counts died with it).
func (tp *Topology) EdgeCounter(name string) (sum float64, unreachable int) {
	tp.t.Helper()
	for _, n := range tp.Edges {
		res, err := http.Get("http://" + n.Admin + "/metrics")
		if err != nil {
			unreachable++
			continue
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		res.Body.Close()
	}
	return sum, unreachable
}

// AddRedisNode starts one more Redis node beside the cluster's (same
// settings, own cgroup), not yet part of it, and returns its address; the
// topology's teardown stops it.
func (tp *Topology) AddRedisNode() string {
	tp.t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "cluster.sh"), "node")
	cmd.Env = append(os.Environ(), "MAYFLY_CLUSTER_DIR="+filepath.Join(tp.Dir, "redis"), "MAYFLY_CLUSTER_NODE_TIMEOUT=2000")
	if b, err := os.ReadFile(filepath.Join(tp.Dir, "redis", "cgroup")); err == nil {
		cmd.Env = append(cmd.Env, "MAYFLY_CLUSTER_CGROUP="+strings.TrimSpace(string(b)))
	}
	out, err := cmd.Output()
	if err != nil {
		tp.t.Fatalf("cluster.sh node: %v", err)
	}
	return "127.0.0.1:" + strings.TrimSpace(string(out))
}

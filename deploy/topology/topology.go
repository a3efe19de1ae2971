// Package topology starts Mayfly's local production topology
// (deploy/topology.sh: a 3+3 Redis Cluster, 2 edge and 2 ingest nodes,
// haproxy in front) for tests and failover drills, and gives them handles on
// its processes. It is test support: nothing in the service imports it.
package topology

import (
	"bufio"
	"fmt"
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

	t testing.TB
}

// Node is one mayfly process.
type Node struct {
	PID   int
	Addr  string // HTTP (edge) or SMTP (ingest) listener
	Admin string // admin listener
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

// Start brings a topology up with env (MAYFLY_* settings for every node)
// added to the environment, and tears it down when the test ends.
func Start(t testing.TB, env ...string) *Topology {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "deploy", "topology.sh"), "up")
	cmd.Env = append(append(os.Environ(), "MAYFLY_BIN="+bin), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("topology.sh up: %v\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	tp := &Topology{Dir: dir, t: t}
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
	for i := 1; i <= 2; i++ {
		n := strconv.Itoa(i)
		pe, _ := strconv.Atoi(kv["EDGE"+n+"_PID"])
		pi, _ := strconv.Atoi(kv["INGEST"+n+"_PID"])
		tp.Edges = append(tp.Edges, Node{PID: pe, Addr: kv["EDGE"+n+"_HTTP"], Admin: kv["EDGE"+n+"_ADMIN"]})
		tp.Ingests = append(tp.Ingests, Node{PID: pi, Addr: kv["INGEST"+n+"_SMTP"], Admin: kv["INGEST"+n+"_ADMIN"]})
	}
	if tp.HTTPURL == "" || tp.SMTPAddr == "" || len(tp.RedisAddrs) != 6 || tp.Edges[1].PID == 0 || tp.Ingests[1].PID == 0 {
		return fmt.Errorf("topology.env incomplete: %v", kv)
	}
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

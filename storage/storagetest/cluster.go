package storagetest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/redis/rueidis"
)

// Cluster is a Redis Cluster of the test's own, with replicas, for tests that
// fail a primary over. The shared cluster of MAYFLY_TEST_REDIS_ADDRS is never
// disturbed: these nodes live in the test's temp dir and die with the test.
type Cluster struct {
	t     testing.TB
	dir   string
	nodes map[string]*process // addr → its redis-server
}

// startNode starts a cluster node on a free port pair and returns its
// address once it answers there as itself (launch). The nodes of one
// cluster start one after the other, each listening before the next port is
// picked; a node that loses its port is started again on other ports.
func (c *Cluster) startNode() string {
	c.t.Helper()
	for range 20 {
		port := freePortPair(c.t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, ok := launch(c.t, port, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
			// Replicas sync at once and may always take over: a test kills a
			// primary seconds after the cluster forms.
			"--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
			"--dir", c.dir, "--logfile", filepath.Join(c.dir, strconv.Itoa(port)+".log"),
			"--cluster-config-file", strconv.Itoa(port)+".conf")
		if ok {
			c.nodes[addr] = p
			return addr
		}
		c.t.Logf("redis-server on %s did not start (port taken?); trying other ports", addr)
	}
	c.t.Fatal("could not start a redis-server on a free port in 20 tries")
	return ""
}

// StartCluster starts masters primaries with replicas replicas each, with a
// one-second node timeout so a killed primary fails over within seconds.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dir: t.TempDir(), nodes: map[string]*process{}}
	t.Cleanup(c.stop)
	var addrs []string
	for range masters * (1 + replicas) {
		addrs = append(addrs, c.startNode())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(30 * time.Second)
	if replicas > 0 {
		c.waitEveryNode("has its replication link up", 30*time.Second, func(a string) bool {
			out, err := c.cli(a, "INFO", "replication")
			return err == nil && (!strings.Contains(out, "role:slave") || strings.Contains(out, "master_link_status:up"))
		})
		// Replicas join as empty primaries and become replicas by CLUSTER
		// REPLICATE, which the other nodes (the primary among them) learn
		// by gossip, possibly after the sync is up: until then ReplicasOf
		// may find none, and a write may not know to wait. deploy/cluster.sh
		// up waits for the same (roles_known_at).
		c.waitEveryNode(fmt.Sprintf("lists %d replicas with their primaries", masters*replicas), 30*time.Second, func(a string) bool {
			out, err := c.cli(a, "CLUSTER", "NODES")
			return err == nil && rolesKnown(out, masters*replicas)
		})
		c.warmReplication(replicas)
	}
	return c
}

// warmReplication makes one write on every primary and waits, up to 30 s,
// until all its replicas acknowledge it. The first write a primary of a
// cluster just formed replicates has missed a test's 200–300 ms replica
// timeout under make test's load, where the writes after it did not: tests
// that time the WAIT start after that first one. The key expires in 5 s.
func (c *Cluster) warmReplication(replicas int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for a := range c.nodes {
		if out, err := c.cli(a, "INFO", "replication"); err != nil || !strings.Contains(out, "role:master") {
			continue
		}
		key := ""
		for i := 0; key == ""; i++ {
			k := fmt.Sprintf("storagetest:warm:%d", i)
			if c.PrimaryFor(k) == a {
				key = k
			}
		}
		for {
			host, port, _ := net.SplitHostPort(a)
			cmd := exec.Command("redis-cli", "-h", host, "-p", port)
			cmd.Stdin = strings.NewReader(fmt.Sprintf("SET %s 1 PX 5000\nWAIT %d 10000\n", key, replicas))
			out, err := cmd.Output()
			lines := strings.Fields(string(out))
			if err == nil && len(lines) == 2 && lines[0] == "OK" && lines[1] == strconv.Itoa(replicas) {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("primary %s: a write was not acknowledged by its %d replicas within 30 s: %v %q", a, replicas, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitEveryNode waits until ok holds for every live node, or fails the test
// after within saying which condition did not hold.
func (c *Cluster) waitEveryNode(what string, within time.Duration, ok func(addr string) bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		all := true
		for a := range c.nodes {
			if !ok(a) {
				all = false
				break
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not every node %s after %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rolesKnown reports whether a CLUSTER NODES reply lists n replicas with a
// primary each and no node flagged failing (fail or fail?).
func rolesKnown(nodes string, n int) bool {
	replicas := 0
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if strings.Contains(f[2], "fail") {
			return false
		}
		if strings.Contains(f[2], "slave") && f[3] != "-" {
			replicas++
		}
	}
	return replicas == n
}

// Client returns a client of the cluster as Mayfly builds it
// (storage.ClientOption), closed when the test ends.
func (c *Cluster) Client() rueidis.Client {
	c.t.Helper()
	client, err := rueidis.NewClient(storage.ClientOption(c.Addrs(), 2*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(client.Close)
	return client
}

// Addrs returns every node's address (seeds for a client).
func (c *Cluster) Addrs() []string {
	var out []string
	for a := range c.nodes {
		out = append(out, a)
	}
	return out
}

// PrimaryFor returns the address of the primary serving key's slot.
func (c *Cluster) PrimaryFor(key string) string {
	c.t.Helper()
	for a := range c.nodes {
		slotOut, err := c.cli(a, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot, _ := strconv.Atoi(strings.TrimSpace(slotOut))
		nodes, err := c.cli(a, "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(nodes))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
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
					addr, _, _ := strings.Cut(f[1], "@")
					return addr
				}
			}
		}
	}
	c.t.Fatalf("no primary found for %q", key)
	return ""
}

// ReplicaOf returns the address of a replica of the primary at addr.
func (c *Cluster) ReplicaOf(primary string) string {
	c.t.Helper()
	return c.ReplicasOf(primary)[0]
}

// ReplicasOf returns the addresses of every replica of the primary at addr
// (at least one, or the test fails).
func (c *Cluster) ReplicasOf(primary string) []string {
	c.t.Helper()
	out, err := c.cli(primary, "CLUSTER", "MYID")
	if err != nil {
		c.t.Fatalf("CLUSTER MYID %s: %v", primary, err)
	}
	id := strings.TrimSpace(out)
	nodes, err := c.cli(primary, "CLUSTER", "NODES")
	if err != nil {
		c.t.Fatalf("CLUSTER NODES %s: %v", primary, err)
	}
	var replicas []string
	sc := bufio.NewScanner(strings.NewReader(nodes))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 4 && strings.Contains(f[2], "slave") && f[3] == id {
			addr, _, _ := strings.Cut(f[1], "@")
			replicas = append(replicas, addr)
		}
	}
	if len(replicas) == 0 {
		c.t.Fatalf("no replica of %s", primary)
	}
	return replicas
}

// Stop freezes the node at addr (SIGSTOP): it keeps its connections but
// answers nothing, like a stalled process. The test's cleanup resumes it.
func (c *Cluster) Stop(addr string) {
	c.t.Helper()
	p := c.nodes[addr]
	if p == nil {
		c.t.Fatalf("no node %s", addr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("SIGSTOP %s: %v", addr, err)
	}
	c.t.Cleanup(func() { c.Cont(addr) })
}

// SetNodeTimeout sets every node's cluster-node-timeout (StartCluster's is
// one second, so that a killed primary fails over within seconds). A test
// that freezes a replica to watch writes wait for it raises it: within
// about two seconds of a one-second timeout the other nodes flag the frozen
// replica as failed, and a replica flagged failed and silent is no longer
// waited for (storage's replica view), which such a test does not test.
func (c *Cluster) SetNodeTimeout(d time.Duration) {
	c.t.Helper()
	for a := range c.nodes {
		if out, err := c.cli(a, "CONFIG", "SET", "cluster-node-timeout", strconv.FormatInt(d.Milliseconds(), 10)); err != nil || strings.TrimSpace(out) != "OK" {
			c.t.Fatalf("CONFIG SET cluster-node-timeout on %s: %v %q", a, err, out)
		}
	}
}

// Cont resumes a node frozen by Stop.
func (c *Cluster) Cont(addr string) {
	if p := c.nodes[addr]; p != nil {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Kill ends the node at addr at once, as a crash would.
func (c *Cluster) Kill(addr string) {
	if p := c.nodes[addr]; p != nil {
		p.kill()
		delete(c.nodes, addr)
	}
}

// WaitOK waits until every live node reports cluster_state:ok.
func (c *Cluster) WaitOK(within time.Duration) {
	c.t.Helper()
	c.waitEveryNode("reports cluster_state:ok", within, func(a string) bool {
		out, err := c.cli(a, "CLUSTER", "INFO")
		return err == nil && strings.Contains(out, "cluster_state:ok")
	})
}

// Redis runs one command with redis-cli on the node at addr and returns its
// output, trimmed.
func (c *Cluster) Redis(addr string, args ...string) string {
	c.t.Helper()
	out, err := c.cli(addr, args...)
	if err != nil {
		c.t.Fatalf("redis-cli %s %v: %v", addr, args, err)
	}
	return strings.TrimSpace(out)
}

func (c *Cluster) cli(addr string, args ...string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).Output()
	return string(out), err
}

func (c *Cluster) stop() {
	for a := range c.nodes {
		c.Kill(a)
	}
}

// freePortPair finds a loopback port p with p+10000 (its cluster bus) free
// too. Both lie below Linux's ephemeral range (32768 up), where outgoing
// connections take their ports; a clash with another server is left to
// startNode's retry.
func freePortPair(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 10000 + rand.IntN(5000)
		a, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

//go:build drill

package topology_test

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// The drills that only `make drill` runs (go test -tags drill, with
// MAYFLY_DRILL=full for the longer load): together with the two in
// drill_test.go they are the table of deploy/README.md.

// A primary that stalls for 5 s (longer than the node timeout) while its
// replica is promoted, then wakes up still believing it is the primary: the
// drill that lost a 250 before writes waited for a replica.
func TestDrillStallPrimary(t *testing.T) {
	d := newDrill(t)
	primary, _ := d.tp.PrimaryFor("mf:{" + strings.SplitN(d.boxes[0].addr, "@", 2)[0] + "}:box")
	d.run(func() {
		go func() {
			host, port, _ := strings.Cut(primary, ":")
			_ = exec.Command("redis-cli", "-h", host, "-p", port, "DEBUG", "SLEEP", "5").Run()
		}()
	})
	d.assert(d.check("DEBUG SLEEP 5 on a Redis primary"))
}

// A replica killed with -9: writes to its primary wait for a replica that
// is gone until the primary notices, then go on without one.
func TestDrillKillReplica(t *testing.T) {
	d := newDrill(t)
	_, replica := d.tp.PrimaryFor("mf:{" + strings.SplitN(d.boxes[0].addr, "@", 2)[0] + "}:box")
	pid := d.tp.RedisPID(replica)
	d.run(func() { d.tp.Kill(pid) })
	d.assert(d.check("kill -9 a Redis replica"))
}

// An edge node killed with -9 while every mailbox has an event stream open:
// haproxy sends new requests to the other edge; streams reconnect there with
// Last-Event-ID and miss nothing.
func TestDrillKillEdge(t *testing.T) {
	d := newDrill(t)
	d.run(func() { d.tp.Kill(d.tp.Edges[0].PID) })
	r := d.check("kill -9 an edge node")
	d.assert(r)
	if r.streams == 0 {
		t.Errorf("no event stream reconnected: were none on the killed edge?")
	}
}

// An ingest node killed with -9 under load, with transactions mid-DATA: the
// senders see a dropped connection (never a 250 for what was not stored),
// retry through haproxy on the other ingest, and each message is stored
// exactly once.
func TestDrillKillIngest(t *testing.T) {
	d := newDrill(t)
	d.run(func() { d.tp.Kill(d.tp.Ingests[0].PID) })
	d.assert(d.check("kill -9 an ingest node under load"))
}

// Live resharding under load, as an operator grows the cluster and shrinks
// it back: a new primary with a replica joins (redis-cli --cluster add-node),
// takes its share of the slots (rebalance --cluster-use-empty-masters), and
// gives them all back (rebalance --cluster-weight <new>=0). Slots move while
// clients still route them to the old owner: the script is answered MOVED or
// ASK, and storage sends script, WAIT and CLUSTER MYID again to the new owner
// on one connection. Every 250 must be a write acknowledged after a WAIT on
// the node that stored it: none without WAIT (every primary has a replica
// throughout), and at least one redirect seen.
func TestDrillReshard(t *testing.T) {
	d := newDrill(t)
	seed := d.tp.RedisAddrs[0]
	var took time.Duration
	var orphans orphanWatch
	stop := orphans.watch(d)
	defer stop()
	d.run(func() {
		start := time.Now()
		primary, replica := d.tp.AddRedisNode(), d.tp.AddRedisNode()
		cli(t, "--cluster", "add-node", primary, seed)
		waitKnown(t, d, primary)
		id, _ := d.tp.Redis(primary, "CLUSTER", "MYID")
		cli(t, "--cluster", "add-node", replica, seed, "--cluster-slave", "--cluster-master-id", id)
		waitSynced(t, d, replica)
		waitAgree(t, seed)
		cli(t, "--cluster", "rebalance", seed, "--cluster-use-empty-masters")
		waitAgree(t, seed)
		cli(t, "--cluster", "rebalance", seed, "--cluster-weight", id+"=0")
		took = time.Since(start)
		t.Logf("resharding took %v", took.Round(time.Millisecond))
	})
	// Refusals (TRYAGAIN on a slot mid-migration) may come at any time of the
	// resharding: the windows are bounded by its length plus the target.
	d.bound = took + failoverBound()
	r := d.check("reshard: add a primary + replica, rebalance, move slots back")
	d.assert(r)
	w := d.durableWrites(r)
	stop()
	t.Logf("views in which a primary holding slots listed no replica that was not failed: %d %v", orphans.n, orphans.first)
	if w["acked_no_wait"] != 0 {
		t.Errorf("%v writes acknowledged without WAIT; every primary had a replica", w["acked_no_wait"])
	}
	if w["acked_waited"] < float64(r.accepted) {
		t.Errorf("%v writes acknowledged after WAIT on the storing node for %d 250s", w["acked_waited"], r.accepted)
	}
	if w["redirected"] == 0 {
		t.Log("no write was redirected: the clients learned every move before writing to it")
	}
}

func cli(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
}

// waitAgree waits until redis-cli --cluster check passes: every node agrees
// on the configuration, as rebalance requires.
func waitAgree(t *testing.T, seed string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("redis-cli", "--cluster", "check", seed).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "[ERR]") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster check still failing after 30 s:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitKnown waits until every node of the cluster knows addr.
func waitKnown(t *testing.T, d *drill, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, a := range d.tp.RedisAddrs {
			out, _ := d.tp.Redis(a, "CLUSTER", "NODES")
			if !strings.Contains(out, addr+"@") {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not known to the cluster after 30 s", addr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitSynced waits until the replica at addr has finished its first sync.
func waitSynced(t *testing.T, d *drill, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := d.tp.Redis(addr, "INFO", "replication")
		if strings.Contains(out, "master_link_status:up") && strings.Contains(out, "master_sync_in_progress:0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not in sync after 30 s", addr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// orphanWatch polls every node's CLUSTER NODES and counts the views in
// which a primary that holds slots lists no replica without the fail flag:
// the views in which storage (auto) would not wait.
type orphanWatch struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (o *orphanWatch) watch(d *drill) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, a := range d.tp.RedisAddrs {
				out, err := d.tp.Redis(a, "CLUSTER", "NODES")
				if err != nil {
					continue
				}
				replicas := map[string]int{}
				var primaries [][]string
				for line := range strings.Lines(out) {
					f := strings.Fields(line)
					if len(f) < 8 {
						continue
					}
					switch {
					case strings.Contains(f[2], "slave") && !strings.Contains(f[2], "fail"):
						replicas[f[3]]++
					case strings.Contains(f[2], "master") && len(f) > 8:
						primaries = append(primaries, f)
					}
				}
				for _, p := range primaries {
					if replicas[p[0]] == 0 {
						o.mu.Lock()
						o.n++
						if len(o.first) < 3 {
							o.first = append(o.first, a+" sees "+strings.Join(p[:3], " ")+" without replica:\n"+out)
						}
						o.mu.Unlock()
					}
				}
			}
		}
	})
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

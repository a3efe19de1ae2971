//go:build drill

package topology_test

import (
	"os/exec"
	"strings"
	"testing"
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

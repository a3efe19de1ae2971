package storage

import (
	"strings"
	"testing"
)

// The view of CLUSTER NODES: a replica counts unless flagged fail (PFAIL,
// one node's suspicion, still counts); a slot mid-migration belongs to the
// owner its plain entry names.
func TestParseClusterNodes(t *testing.T) {
	const nodes = `a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-100 [100->-b1]
a2 127.0.0.1:7004@17004 slave,fail? a1 0 0 1 connected
b1 127.0.0.1:7002@17002 master - 0 0 2 connected 101-199 [100-<-a1]
b2 127.0.0.1:7005@17005 slave,fail b1 0 0 2 disconnected
c1 127.0.0.1:7003@17003 master - 0 0 3 connected 200-16383
`
	var v topologyView
	addrs, failed := parseClusterNodes(nodes, &v)
	for _, c := range []struct {
		slot   int
		count  uint8
		owner  string
		reason string
	}{
		{0, 1, "a1", "a replica suspected (PFAIL) still counts"},
		{100, 1, "a1", "a migrating slot is still its source's"},
		{150, 0, "b1", "a replica flagged fail does not count"},
		{16383, 0, "c1", "a primary without replicas"},
	} {
		if v.counts[c.slot] != c.count || v.owners[c.slot] != c.owner {
			t.Errorf("slot %d: %d replicas, owner %q; want %d, %q (%s)", c.slot, v.counts[c.slot], v.owners[c.slot], c.count, c.owner, c.reason)
		}
	}
	if addrs["b1"] != "127.0.0.1:7002" || !failed["127.0.0.1:7005"] || failed["127.0.0.1:7004"] {
		t.Errorf("addrs %v, failed %v", addrs, failed)
	}
	// The primary's own INFO lists a replica the cluster does not yet know
	// as one (just attached); one flagged fail is not counted once it has
	// been silent for 2 s, and is while it still acknowledges (the
	// primary's side of a partition).
	info := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=7005,state=online,offset=1,lag=2\r\nslave1:ip=127.0.0.1,port=7006,state=wait_bgsave,offset=0,lag=0\r\n"
	if got := listedReplicas(info, failed); got != 1 {
		t.Errorf("listedReplicas = %d, want 1 (the failed one silent)", got)
	}
	if got := listedReplicas(strings.Replace(info, "lag=2", "lag=1", 1), failed); got != 2 {
		t.Errorf("listedReplicas = %d, want 2 (the failed one still acknowledging)", got)
	}
}

// Marking the view stale (every refused write does) copies nothing: the
// view is about 272 KiB.
func TestStaleDoesNotCopyTheView(t *testing.T) {
	var tp topology
	tp.view.Store(&topologyView{})
	if allocs := testing.AllocsPerRun(100, tp.stale); allocs != 0 {
		t.Errorf("stale() allocates %v times, want 0", allocs)
	}
	if !tp.expired(tp.view.Load()) {
		t.Error("the view is not expired after stale()")
	}
}

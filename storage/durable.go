package storage

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ErrNotReplicated: a write was applied on its primary, but fewer replicas
// than required acknowledged it within Config.ReplicaTimeout. It wraps
// ErrUnavailable, so callers that only know that one answer "try again":
// the write may be lost if the primary dies now, and a retry is safe
// (delivery is idempotent; see DeliveryKey).
var ErrNotReplicated = errors.New("storage: write not acknowledged by enough replicas")

// DeliveryKey is the idempotency key of a delivery: the SHA-256 of the raw
// message bytes the sender transmitted. A sender that retries the same
// transaction sends the same bytes and gets the same key; two different
// messages never share one, even when they share a Message-ID.
func DeliveryKey(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// durableScript is a script whose writes a caller may need acknowledged by
// replicas: EVALSHA and WAIT must travel in one DoMulti so that they share a
// connection (WAIT covers only the writes of its own connection).
type durableScript struct {
	src string
	sha string
}

func newDurableScript(src string) durableScript {
	return durableScript{src: src, sha: sha1Hex(src)}
}

// exec runs a durable script on the slot of keys[0] and returns its reply
// without the trailing node id. The write counts as done only when
//
//   - the slot's primary must be backed by replicas, and WAIT, sent after the
//     script on the very connection that ran it, saw enough of them in time.
//     The batch is {EVALSHA, WAIT, CLUSTER MYID} on one dedicated connection
//     that follows no redirect (several scripts before the WAIT when other
//     writes to the same primary arrive while one is in flight: see
//     groupCommit); the script's node id must equal MYID's, so a
//     WAIT answered by another node (the script was redirected, or retried
//     elsewhere) never counts. A MOVED or ASK reply means the script did not
//     run: the batch goes once more to the node named, on one connection
//     (ASKING first for ASK), under the same rule; or
//   - no replica is required, and the script ran on the node our latest view
//     names as the slot's primary. A stalled primary that wakes up after its
//     replica took over still takes writes until it hears of the failover;
//     those writes are lost, so they must not be acknowledged.
//
// Otherwise err is ErrNotReplicated (an ErrUnavailable); on a Redis failure,
// ErrUnavailable. Every failure marks the topology view stale, so the next
// write looks again rather than at the next periodic refresh.
func (s *Store) exec(ctx context.Context, op string, sc durableScript, keys, args []string) ([]rueidis.RedisMessage, error) {
	b := s.client.B()
	n := int64(len(keys))
	evalsha := func() rueidis.Completed {
		return b.Evalsha().Sha1(sc.sha).Numkeys(n).Key(keys...).Arg(args...).Build()
	}
	eval := func() rueidis.Completed {
		return b.Eval().Script(sc.src).Numkeys(n).Key(keys...).Arg(args...).Build()
	}
	first := evalsha() // a command is recycled once sent: every attempt builds its own
	need, owner := s.replicasFor(ctx, first.Slot())
	if need <= 0 {
		res := s.client.Do(ctx, first)
		if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
			res = s.client.Do(ctx, eval())
		}
		vals, node, err := scriptReply(op, res)
		if err != nil {
			s.topo.stale()
			return nil, err
		}
		if s.cfg.MinReplicas == 0 && node != owner {
			s.topo.stale()
			s.stats.refused.Add(1)
			return vals, fmt.Errorf("%s: %w: %w: ran on node %q, the slot's primary is %q", op, ErrUnavailable, ErrNotReplicated, node, owner)
		}
		s.stats.ackedNoWait.Add(1)
		return vals, nil
	}
	vals, done, counted, err := s.batched(ctx, op, sc, keys, args, need, owner)
	if done {
		return vals, err
	}

	batch := func(script func() rueidis.Completed, asking bool) []rueidis.Completed {
		cmds := make([]rueidis.Completed, 0, 4)
		if asking {
			cmds = append(cmds, b.Asking().Build())
		}
		return append(cmds, script(),
			b.Wait().Numreplicas(int64(need)).Timeout(s.cfg.ReplicaTimeout.Milliseconds()).Build(),
			b.ClusterMyid().Build())
	}
	// send runs the batch with do, once more as EVAL on NOSCRIPT, and again
	// (up to 3 times in all) on TRYAGAIN: a slot being migrated refuses a
	// script whose keys are not all on one side yet, before running it.
	send := func(do func(...rueidis.Completed) []rueidis.RedisResult, asking bool) []rueidis.RedisResult {
		for attempt := 1; ; attempt++ {
			res := do(batch(evalsha, asking)...)
			if err, ok := rueidis.IsRedisErr(res[len(res)-3].Error()); ok && err.IsNoScript() {
				res = do(batch(eval, asking)...)
			}
			res = res[len(res)-3:] // without ASKING's reply
			if err, ok := rueidis.IsRedisErr(res[0].Error()); ok && err.IsTryAgain() && attempt < 3 {
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
					continue
				}
			}
			return res
		}
	}
	// The first attempt: a dedicated connection to the slot's primary as
	// rueidis routes it. It follows no MOVED or ASK (the cluster client's
	// DoMulti would resend the script alone to the new node and leave the WAIT
	// with the old one).
	dc, release := s.client.Dedicate()
	res := send(func(c ...rueidis.Completed) []rueidis.RedisResult { return dc.DoMulti(ctx, c...) }, false)
	release()
	if err, ok := rueidis.IsRedisErr(res[0].Error()); ok && err.IsClusterDown() && owner != "" {
		// The node rueidis routes the slot to is a primary cut off in a
		// minority, while our view, read from a node that reports
		// cluster_state:ok, names the primary the majority promoted (rueidis
		// may have taken its map from the cut node itself). The script did
		// not run: send the batch to that primary.
		if addr := s.topo.addr(owner); addr != "" {
			if node, known := s.client.Nodes()[addr]; known {
				s.stats.redirected.Add(1)
				res = send(func(c ...rueidis.Completed) []rueidis.RedisResult { return node.DoMulti(ctx, c...) }, false)
			}
		}
	}
	if err, ok := rueidis.IsRedisErr(res[0].Error()); ok {
		addr, moved := err.IsMoved()
		askAddr, ask := err.IsAsk()
		if ask {
			addr = askAddr
		}
		if moved || ask {
			// The script did not run. Send the batch to the node named, on
			// one connection of that node's own client (a batch with a
			// blocking command travels on one dedicated connection, and a
			// single node's client follows no redirect either).
			s.topo.stale()
			if !counted { // once per write, whether its batch or this path met the redirect
				s.stats.redirected.Add(1)
			}
			node, known := s.client.Nodes()[addr]
			if !known {
				return nil, fmt.Errorf("%s: %w: %w: redirected to unknown node %s", op, ErrUnavailable, ErrNotReplicated, addr)
			}
			res = send(func(c ...rueidis.Completed) []rueidis.RedisResult { return node.DoMulti(ctx, c...) }, ask)
		}
	}
	return s.acked(op, res[0], res[1], res[2], need)
}

// acked answers a durable write from the replies of its script, of the
// WAIT sent after it on the same connection, and of CLUSTER MYID sent after
// that: done only when the node that ran the script answered the WAIT and
// at least need replicas acknowledged in time.
func (s *Store) acked(op string, script, wait, myid rueidis.RedisResult, need int) ([]rueidis.RedisMessage, error) {
	vals, node, err := scriptReply(op, script)
	if err != nil {
		s.topo.stale()
		return nil, err
	}
	waitedOn, _ := myid.ToString() // a standalone server has no CLUSTER MYID: "" as node_id
	acked, err := wait.AsInt64()
	switch {
	case err != nil:
		s.topo.stale()
		s.stats.refused.Add(1)
		return vals, fmt.Errorf("%s: %w: %w: wait: %w", op, ErrUnavailable, ErrNotReplicated, err)
	case waitedOn != node:
		// Never expected on one connection; checked, since a WAIT of another
		// node would pass at once and prove nothing.
		s.topo.stale()
		s.stats.refused.Add(1)
		return vals, fmt.Errorf("%s: %w: %w: the script ran on node %q, WAIT on %q", op, ErrUnavailable, ErrNotReplicated, node, waitedOn)
	case acked < int64(need):
		// Often a failover: the slot's new primary has no replica yet, or
		// this primary is cut off from its replica.
		s.topo.stale()
		s.stats.refused.Add(1)
		return vals, fmt.Errorf("%s: %w: %w: %d of %d replicas in %v", op, ErrUnavailable, ErrNotReplicated, acked, need, s.cfg.ReplicaTimeout)
	}
	s.stats.ackedWaited.Add(1)
	return vals, nil
}

// scriptReply splits a durable script's reply into its values and the id of
// the node that ran it (the last element).
func scriptReply(op string, res rueidis.RedisResult) ([]rueidis.RedisMessage, string, error) {
	vals, err := res.ToArray()
	if err != nil || len(vals) < 2 {
		return nil, "", unavailable(op, fmt.Errorf("reply %v: %w", vals, err))
	}
	node, _ := vals[len(vals)-1].ToString()
	return vals[:len(vals)-1], node, nil
}

// WriteStats counts the durable writes (creations and deliveries) of a
// Store since it was made; the drills read them from /metrics.
type WriteStats struct {
	// AckedWaited: acknowledged after a WAIT answered by the node that ran
	// the script, on the script's own connection.
	AckedWaited int64
	// AckedNoWait: acknowledged without WAIT (no replica required).
	AckedNoWait int64
	// Refused: ErrNotReplicated (too few replicas in time, WAIT on another
	// node, or the script ran on a node that is not the slot's primary).
	Refused int64
	// Redirected: the script was answered MOVED or ASK and sent again to
	// the node named.
	Redirected int64
	// Batches: the group commits sent (scripts, one WAIT, CLUSTER MYID on
	// one connection); AckedWaited / Batches is the mean batch.
	Batches int64
}

type writeStats struct {
	ackedWaited, ackedNoWait, refused, redirected, batches atomic.Int64
}

// WriteStats returns the counts so far.
func (s *Store) WriteStats() WriteStats {
	return WriteStats{
		AckedWaited: s.stats.ackedWaited.Load(), AckedNoWait: s.stats.ackedNoWait.Load(),
		Refused: s.stats.refused.Load(), Redirected: s.stats.redirected.Load(), Batches: s.stats.batches.Load(),
	}
}

// replicasFor is how many replicas must acknowledge a write to slot, and
// the id of the slot's primary as far as we know ("" on a standalone
// server): Config.MinReplicas when set, else (auto) 1 when the cluster lists
// a replica of the slot's primary that it has not marked failed, and 0 when
// it lists none (standalone Redis, a cluster without replicas, or a primary
// whose every replica the majority of primaries agreed is dead).
//
// A replica that lags, or that its primary cannot reach, still counts: that
// is what a partition looks like from the primary's side, and exactly when
// a write must not be acknowledged without it.
func (s *Store) replicasFor(ctx context.Context, slot uint16) (int, string) {
	if s.cfg.MinReplicas < 0 {
		return 0, ""
	}
	n, owner := s.topo.replicas(ctx, s.client, slot)
	if s.cfg.MinReplicas > 0 {
		return s.cfg.MinReplicas, owner
	}
	return min(1, n), owner
}

// topology caches, per slot, how many replicas its primary has and which
// node that primary is, from CLUSTER NODES: every replica counts unless
// flagged "fail" (the FAIL flag needs the agreement of a majority of
// primaries, so a minority partition cannot raise it; PFAIL, one node's
// suspicion, does not count). It is refreshed in the background at most
// once per topologyTTL, and at once after a failed write; only the first
// call of a process waits for it.
type topology struct {
	view       atomic.Pointer[topologyView]
	refreshing atomic.Bool
	first      sync.Once
}

type topologyView struct {
	at     time.Time
	counts [16384]uint8
	owners [16384]string     // node id of each slot's primary; "" standalone
	addrs  map[string]string // "ip:port" of each primary holding slots, by id
}

const topologyTTL = time.Second

// stale makes the next call refresh the view.
func (t *topology) stale() {
	if v := t.view.Load(); v != nil {
		cp := *v
		cp.at = time.Time{}
		t.view.Store(&cp)
	}
}

// addr is the address of the primary with id in the current view, or "".
func (t *topology) addr(id string) string {
	if v := t.view.Load(); v != nil && id != "" {
		return v.addrs[id]
	}
	return ""
}

func (t *topology) replicas(ctx context.Context, c rueidis.Client, slot uint16) (int, string) {
	t.first.Do(func() { t.refresh(ctx, c) })
	v := t.view.Load()
	if v == nil || time.Since(v.at) > topologyTTL {
		if t.refreshing.CompareAndSwap(false, true) {
			go func() {
				defer t.refreshing.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				t.refresh(ctx, c)
			}()
		}
	}
	if v == nil || int(slot) >= len(v.counts) {
		return 0, ""
	}
	return int(v.counts[slot]), v.owners[slot]
}

// refresh rebuilds the view. A server that is not a cluster answers CLUSTER
// NODES with an error: it has no replica we could wait for (a standalone
// server's replicas are not Mayfly's failover path), so every slot counts 0.
// On any other failure the previous view stays.
//
// A primary's count is the larger of the cluster's view and its own INFO
// replication (every replica line, whatever its state or lag, but for those
// the cluster flagged fail): a replica just attached is known to its
// primary before every other node has heard of its new role (seen while
// resharding: 508 deliveries acknowledged without WAIT in one drill run).
func (t *topology) refresh(ctx context.Context, c rueidis.Client) {
	v := &topologyView{at: time.Now()}
	text, err := clusterNodes(ctx, c)
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			t.view.Store(v)
		}
		return
	}
	// RESP3 answers a verbatim string; rueidis keeps its "txt:" format prefix.
	addrs, failed := parseClusterNodes(strings.TrimPrefix(text, "txt:"), v)
	v.addrs = addrs
	nodes := c.Nodes()
	own := map[string]uint8{} // primary id → replicas it lists itself
	for id, addr := range addrs {
		node, ok := nodes[addr]
		if !ok {
			continue
		}
		info, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
		if err == nil {
			own[id] = listedReplicas(info, failed)
		}
	}
	for s := range v.counts {
		if n := own[v.owners[s]]; n > v.counts[s] {
			v.counts[s] = n
		}
	}
	t.view.Store(v)
}

// listedReplicas counts the lines "slaveN:ip=…,port=…,state=…" of INFO
// replication, whatever their state or lag, but for the addresses in failed.
func listedReplicas(info string, failed map[string]bool) uint8 {
	var n uint8
	for line := range strings.Lines(info) {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "slave") || k == "slave" || strings.Trim(k, "slave0123456789") != "" {
			continue
		}
		var ip, port string
		for kv := range strings.SplitSeq(val, ",") {
			key, value, _ := strings.Cut(kv, "=")
			switch key {
			case "ip":
				ip = value
			case "port":
				port = value
			}
		}
		if !failed[net.JoinHostPort(ip, port)] && n < 255 {
			n++
		}
	}
	return n
}

// clusterNodes reads CLUSTER NODES from a node that reports cluster_state:ok,
// trying up to 3 in random order: a primary cut off in a minority still
// names itself the owner of its slots, but reports cluster_state:fail once
// it knows it is cut off. With none ok, the last view read.
func clusterNodes(ctx context.Context, c rueidis.Client) (string, error) {
	var text string
	err := errors.New("no redis node known")
	tried := 0
	for _, n := range c.Nodes() { // map order: random
		if tried++; tried > 3 {
			break
		}
		res := n.DoMulti(ctx, n.B().ClusterInfo().Build(), n.B().ClusterNodes().Build())
		info, err1 := res[0].ToString()
		nodes, err2 := res[1].ToString()
		if err = errors.Join(err1, err2); err != nil {
			if _, ok := rueidis.IsRedisErr(err1); ok {
				return "", err1 // not a cluster
			}
			continue
		}
		text = nodes
		if strings.Contains(info, "cluster_state:ok") {
			return text, nil
		}
	}
	if text != "" {
		return text, nil
	}
	return "", err
}

// parseClusterNodes fills v from CLUSTER NODES: lines "<id> <addr> <flags>
// <primary id> <ping> <pong> <epoch> <link> <slot or range>...", and returns
// the address ("ip:port") of every primary that holds a slot, by id, and the
// addresses of the nodes flagged fail.
func parseClusterNodes(text string, v *topologyView) (addrs map[string]string, failed map[string]bool) {
	addrs, failed = map[string]string{}, map[string]bool{}
	replicas := map[string]uint8{} // primary id → replicas not failed
	type primary struct {
		id, addr string
		ranges   []string
	}
	var primaries []primary
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "fail") {
			addr, _, _ := strings.Cut(f[1], "@")
			failed[addr] = true
		}
		switch {
		case slices.Contains(flags, "slave"):
			if !slices.Contains(flags, "fail") && !slices.Contains(flags, "handshake") && !slices.Contains(flags, "noaddr") {
				replicas[f[3]] = min(replicas[f[3]]+1, 255)
			}
		case slices.Contains(flags, "master"):
			addr, _, _ := strings.Cut(f[1], "@")
			primaries = append(primaries, primary{f[0], addr, f[8:]})
		}
	}
	for _, p := range primaries {
		for _, r := range p.ranges {
			if strings.HasPrefix(r, "[") {
				continue // a slot migrating or importing: owned as its plain entry says
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || l < 0 || h >= len(v.counts) || l > h {
				continue
			}
			for s := l; s <= h; s++ {
				v.counts[s] = replicas[p.id]
				v.owners[s] = p.id
			}
			addrs[p.id] = p.addr
		}
	}
	return addrs, failed
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

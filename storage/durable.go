package storage

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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

// storedKey is delivery key k as the box stores it, and as mailboxes made
// before 2026-11-25 stored it: a DeliveryKey is kept as its first 16 bytes,
// raw, where it was 64 hex digits; any other key is kept as it is. Dedupe
// is per mailbox, among at most MaxMessages messages: with 128 bits two
// different messages never share a key in practice, and crafting a message
// whose key matches a stored one takes a second preimage, 2^128 work.
func storedKey(k string) (key, old string) {
	if len(k) != 2*sha256.Size {
		return k, k
	}
	b, err := hex.DecodeString(k)
	if err != nil {
		return k, k
	}
	return string(b[:16]), k
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
	need, owner, err := s.replicasFor(ctx, first.Slot())
	if err != nil {
		// How many replicas to wait for cannot be known: the write is not
		// made, rather than acknowledged on a guess (451, the sender retries).
		s.stats.refused.Add(1)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
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

// WriteStats counts the durable writes (creations, deliveries, selects,
// extensions and deletes) of a Store since it was made; the drills read
// them from /metrics.
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
	// ViewRefreshFailures: reads of the replica view (CLUSTER INFO and
	// CLUSTER NODES) that failed, in the background or before a write.
	ViewRefreshFailures int64
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
		ViewRefreshFailures: s.topo.failures.Load(),
	}
}

// replicasFor is how many replicas must acknowledge a write to slot, and
// the id of the slot's primary as far as we know ("" on a standalone
// server): (auto) every replica of the slot's primary that the view counts
// (see topology: those not flagged failed, and those flagged failed that
// still acknowledge the primary), 0 when it counts none (standalone Redis,
// a cluster without replicas, or a primary whose every replica the majority
// of primaries agreed is dead and which has gone silent); with
// Config.MinReplicas set, at least that many.
//
// Every one, not one: WAIT n counts any n replicas, and the majority may
// promote one that is not among them. With replicas R1 and R2 and the
// partition {primary, R2} | {R1, the majority}, WAIT 1 is answered by R2
// while R1 is promoted (the drill with 2 replicas per primary lost 363 of
// 4,810 acknowledged messages that way). Only a replica the majority has
// not flagged failed can win an election (it needs a majority's votes), so
// waiting for all of those, and for every one that can answer the WAIT,
// leaves none that could be promoted without the write.
//
// A replica that lags, or that its primary cannot reach, still counts: that
// is what a partition looks like from the primary's side, and exactly when
// a write must not be acknowledged without it.
//
// Errors: ErrUnavailable when the view is needed and cannot be read.
func (s *Store) replicasFor(ctx context.Context, slot uint16) (int, string, error) {
	if s.cfg.MinReplicas < 0 {
		return 0, "", nil
	}
	n, owner, err := s.topo.replicas(ctx, s.client, slot)
	if err != nil {
		return 0, "", err
	}
	return max(s.cfg.MinReplicas, n), owner, nil
}

// topology caches, per slot, how many replicas its primary has and which
// node that primary is, from CLUSTER NODES: every replica counts unless
// flagged "fail" (the FAIL flag needs the agreement of a majority of
// primaries, so a minority partition cannot raise it; PFAIL, one node's
// suspicion, does not count), and from the primary's own INFO replication
// (see listedReplicas). A view older than topologyTTL, or marked
// stale after a failed write, is read again: in the background when it asks
// for a WAIT (the WAIT fences the write whatever the view's age), before the
// write when it would skip the WAIT (it may predate a replica's return).
type topology struct {
	view       atomic.Pointer[topologyView]
	dirty      atomic.Bool // stale() since the view was read
	refreshing atomic.Bool
	mu         sync.Mutex // one refresh before a write at a time
	failures   atomic.Int64
	log        *slog.Logger
	loggedAt   atomic.Int64 // unix ns of the last failure logged
	logged     atomic.Int64 // failures counted when it was
}

type topologyView struct {
	at     time.Time
	counts [16384]uint8
	owners [16384]string     // node id of each slot's primary; "" standalone
	addrs  map[string]string // "ip:port" of each primary holding slots, by id
}

const topologyTTL = time.Second

// viewNodeTimeout bounds each node's answer while the view is read: a
// stalled node (DEBUG SLEEP, SIGSTOP) must not hold a write that waits for
// the view for the whole of its budget; the next node is asked instead.
const viewNodeTimeout = 500 * time.Millisecond

// stale makes the next call refresh the view. It is called on every
// refused write, so it only sets a flag: no copy of the view.
func (t *topology) stale() { t.dirty.Store(true) }

// expired: v must be read again before it is trusted to skip a WAIT.
func (t *topology) expired(v *topologyView) bool {
	return v == nil || t.dirty.Load() || time.Since(v.at) > topologyTTL
}

// addr is the address of the primary with id in the current view, or "".
func (t *topology) addr(id string) string {
	if v := t.view.Load(); v != nil && id != "" {
		return v.addrs[id]
	}
	return ""
}

// replicas is the count and owner of slot in a view fresh enough for the
// decision it makes; an error when it would skip the WAIT and cannot be
// read again (ErrUnavailable).
func (t *topology) replicas(ctx context.Context, c rueidis.Client, slot uint16) (int, string, error) {
	v := t.view.Load()
	if t.expired(v) {
		if v != nil && int(slot) < len(v.counts) && v.counts[slot] > 0 {
			t.refreshInBackground(c)
		} else {
			var err error
			if v, err = t.refreshNow(ctx, c, v); err != nil {
				return 0, "", fmt.Errorf("%w: replica view unknown: %w", ErrUnavailable, err)
			}
		}
	}
	if int(slot) >= len(v.counts) { // a standalone client's commands have no slot
		return 0, "", nil
	}
	return int(v.counts[slot]), v.owners[slot], nil
}

func (t *topology) refreshInBackground(c rueidis.Client) {
	if t.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer t.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = t.refresh(ctx, c)
		}()
	}
}

// refreshNow reads the view before a write, unless another call read one
// since the caller loaded seen: one read at a time, and the writers queued
// behind it take its result (a view read after they asked), even if a
// refused write has marked it stale again meanwhile.
func (t *topology) refreshNow(ctx context.Context, c rueidis.Client, seen *topologyView) (*topologyView, error) {
	asked := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.view.Load(); v != nil && (v.at.After(asked) || v != seen && !t.expired(v)) {
		return v, nil
	}
	if err := t.refresh(ctx, c); err != nil {
		return nil, err
	}
	return t.view.Load(), nil
}

// refresh rebuilds the view. A server that is not a cluster ("ERR This
// instance has cluster support disabled") has no replica we could wait for
// (a standalone server's replicas are not Mayfly's failover path), so every
// slot counts 0. Any other failure (a transport error, -NOPERM from an ACL
// that denies CLUSTER INFO or NODES, -BUSY, -LOADING) says nothing about the
// replicas: the previous view stays, still due for a refresh, and the
// failure is counted and logged.
//
// A primary's count is the larger of the cluster's view and its own INFO
// replication (every replica line, whatever its state or lag, but for those
// the cluster flagged fail that have gone silent; see listedReplicas): a replica just attached is known to its
// primary before every other node has heard of its new role (seen while
// resharding: 508 deliveries acknowledged without WAIT in one drill run).
func (t *topology) refresh(ctx context.Context, c rueidis.Client) error {
	t.dirty.Store(false) // a stale() from here on asks again
	v := &topologyView{at: time.Now()}
	text, err := clusterNodes(ctx, c)
	if errors.Is(err, errStandalone) {
		t.view.Store(v)
		return nil
	}
	if err != nil {
		t.dirty.Store(true)
		t.failed(err)
		return err
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
		nctx, cancel := context.WithTimeout(ctx, viewNodeTimeout)
		info, err := node.Do(nctx, node.B().Info().Section("replication").Build()).ToString()
		cancel()
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
	return nil
}

// failed counts a failed refresh and logs it: the first, then at most one
// line every 10 s with the failures since the last.
func (t *topology) failed(err error) {
	n := t.failures.Add(1)
	now := time.Now().UnixNano()
	last := t.loggedAt.Load()
	if last != 0 && now-last < int64(10*time.Second) || !t.loggedAt.CompareAndSwap(last, now) {
		return
	}
	since := n - t.logged.Swap(n)
	if t.log != nil {
		t.log.Error("redis replica view unreadable: writes are refused (451/503) but for those the last view read asks a WAIT for",
			"err", err, "failures", since)
	}
}

// listedReplicas counts the lines "slaveN:ip=…,port=…,state=…,lag=…" of
// INFO replication, whatever their state or lag, but for the addresses in
// failed that have not acknowledged anything for 2 s or more (lag ≥ 2; a
// live replica acknowledges every second). A replica flagged failed that
// still acknowledges its primary is on the primary's side of a partition:
// it can answer a WAIT but cannot be promoted, so it must count, or WAIT n
// passes on its answer alone while the one the majority promotes has
// nothing: the majority may flag it before the cut primary notices it is
// cut off and refuses writes (the two-replica partition drill lost 39 of
// 6,466 acknowledged messages in one run while flagged replicas never
// counted). A frozen or dead one stops acknowledging, and stops counting
// once flagged.
func listedReplicas(info string, failed map[string]bool) uint8 {
	var n uint8
	for line := range strings.Lines(info) {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "slave") || k == "slave" || strings.Trim(k, "slave0123456789") != "" {
			continue
		}
		var ip, port string
		lag := -1
		for kv := range strings.SplitSeq(val, ",") {
			key, value, _ := strings.Cut(kv, "=")
			switch key {
			case "ip":
				ip = value
			case "port":
				port = value
			case "lag":
				if l, err := strconv.Atoi(value); err == nil {
					lag = l
				}
			}
		}
		silent := lag < 0 || lag >= 2
		if !(failed[net.JoinHostPort(ip, port)] && silent) && n < 255 {
			n++
		}
	}
	return n
}

// errStandalone: the server is not a cluster.
var errStandalone = errors.New("storage: cluster support disabled")

// clusterNodes reads CLUSTER NODES from a node that reports cluster_state:ok,
// trying up to 3 in random order: a primary cut off in a minority still
// names itself the owner of its slots, but reports cluster_state:fail once
// it knows it is cut off. With none ok, the last view read. Only "cluster
// support disabled" means standalone (errStandalone); any other error
// tries the next node, and with none left the answer is every node's
// error, each with its address (the last tried may be a stalled node
// whose timeout says less than another's refusal).
func clusterNodes(ctx context.Context, c rueidis.Client) (string, error) {
	var text string
	var errs []error // each node's: the last tried may be a stalled one
	tried := 0
	for addr, n := range c.Nodes() { // map order: random
		if tried++; tried > 3 {
			break
		}
		nctx, cancel := context.WithTimeout(ctx, viewNodeTimeout)
		res := n.DoMulti(nctx, n.B().ClusterInfo().Build(), n.B().ClusterNodes().Build())
		cancel()
		info, err1 := res[0].ToString()
		nodes, err2 := res[1].ToString()
		if err := errors.Join(err1, err2); err != nil {
			if re, ok := rueidis.IsRedisErr(err1); ok && strings.Contains(re.Error(), "cluster support disabled") {
				return "", errStandalone
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
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
	if len(errs) == 0 {
		return "", errors.New("no redis node known")
	}
	return "", errors.Join(errs...)
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

package storage

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
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
//   - the slot's primary must be backed by replicas and WAIT, sent in the
//     same batch (so on the same connection), saw enough of them in time; or
//   - no replica is required, and the script ran on the node our latest view
//     names as the slot's primary. A stalled primary that wakes up after its
//     replica took over still takes writes until it hears of the failover;
//     those writes are lost, so they must not be acknowledged.
//
// Otherwise err is ErrNotReplicated (an ErrUnavailable); on a Redis failure,
// ErrUnavailable.
func (s *Store) exec(ctx context.Context, op string, sc durableScript, keys, args []string) ([]rueidis.RedisMessage, error) {
	b := s.client.B()
	n := int64(len(keys))
	evalsha := b.Evalsha().Sha1(sc.sha).Numkeys(n).Key(keys...).Arg(args...).Build()
	slot := evalsha.Slot()
	need, owner := s.replicasFor(ctx, slot)
	var res []rueidis.RedisResult
	if need > 0 {
		wait := func() rueidis.Completed {
			// Keyless, so rueidis sends it beside the script, to the slot's
			// primary; WAIT is a blocking command, so the whole batch goes on
			// one dedicated connection, and WAIT covers the script's writes.
			return b.Wait().Numreplicas(int64(need)).Timeout(s.cfg.ReplicaTimeout.Milliseconds()).Build()
		}
		res = s.client.DoMulti(ctx, evalsha, wait())
		if err, ok := rueidis.IsRedisErr(res[0].Error()); ok && err.IsNoScript() {
			res = s.client.DoMulti(ctx, b.Eval().Script(sc.src).Numkeys(n).Key(keys...).Arg(args...).Build(), wait())
		}
	} else {
		res = []rueidis.RedisResult{s.client.Do(ctx, evalsha)}
		if err, ok := rueidis.IsRedisErr(res[0].Error()); ok && err.IsNoScript() {
			res[0] = s.client.Do(ctx, b.Eval().Script(sc.src).Numkeys(n).Key(keys...).Arg(args...).Build())
		}
	}
	vals, err := res[0].ToArray()
	if err != nil || len(vals) < 2 {
		return nil, unavailable(op, fmt.Errorf("reply %v: %w", vals, err))
	}
	node, _ := vals[len(vals)-1].ToString()
	vals = vals[:len(vals)-1]
	if need > 0 {
		acked, err := res[1].AsInt64()
		if err != nil {
			return vals, fmt.Errorf("%s: %w: %w: wait: %w", op, ErrUnavailable, ErrNotReplicated, err)
		}
		if acked < int64(need) {
			// Often a failover: the slot's new primary has no replica yet.
			// Look again now rather than at the next periodic refresh.
			s.topo.stale()
			return vals, fmt.Errorf("%s: %w: %w: %d of %d replicas in %v", op, ErrUnavailable, ErrNotReplicated, acked, need, s.cfg.ReplicaTimeout)
		}
		return vals, nil
	}
	if s.cfg.MinReplicas == 0 && node != owner {
		s.topo.stale()
		return vals, fmt.Errorf("%s: %w: %w: ran on node %q, the slot's primary is %q", op, ErrUnavailable, ErrNotReplicated, node, owner)
	}
	return vals, nil
}

// replicasFor is how many replicas must acknowledge a write to slot, and
// the id of the slot's primary as far as we know (” on a standalone
// server): Config.MinReplicas when set, else (auto) 1 when the slot's primary
// has a healthy replica and 0 when it has none (standalone Redis, a cluster
// without replicas, or a primary whose replicas died or stall).
func (s *Store) replicasFor(ctx context.Context, slot uint16) (int, string) {
	switch {
	case s.cfg.MinReplicas < 0:
		return 0, ""
	case s.cfg.MinReplicas > 0:
		return s.cfg.MinReplicas, ""
	}
	n, owner := s.topo.replicas(ctx, s.client, slot)
	return min(1, n), owner
}

// topology caches, per slot, how many healthy replicas its primary has. The
// slot ranges come from CLUSTER SLOTS; the replicas from each primary's own
// INFO replication, counting those online whose last acknowledgement is at
// most maxReplicaLag old (a replica that died or stalls drops out within
// seconds; gossip views of other nodes may lag behind). It is refreshed in
// the background at most once per topologyTTL; only the first call of a
// process waits for it.
type topology struct {
	view       atomic.Pointer[topologyView]
	refreshing atomic.Bool
	first      sync.Once
}

type topologyView struct {
	at     time.Time
	counts [16384]uint8
	owners [16384]string // node id of each slot's primary; "" standalone
}

const (
	topologyTTL   = time.Second
	maxReplicaLag = 1 // seconds, as INFO replication reports lag
)

// stale makes the next call refresh the view.
func (t *topology) stale() {
	if v := t.view.Load(); v != nil {
		cp := *v
		cp.at = time.Time{}
		t.view.Store(&cp)
	}
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
// SLOTS with an error: it has no replica we could wait for (a standalone
// server's replicas are not Mayfly's failover path), so every slot counts 0.
// On any other failure the previous view stays.
func (t *topology) refresh(ctx context.Context, c rueidis.Client) {
	v := &topologyView{at: time.Now()}
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			t.view.Store(v)
		}
		return
	}
	nodes := c.Nodes()
	replicas := map[string]uint8{} // primary addr → healthy replicas
	for _, r := range ranges {
		e, err := r.ToArray()
		if err != nil || len(e) < 3 {
			continue
		}
		lo, err1 := e[0].AsInt64()
		hi, err2 := e[1].AsInt64()
		addr, id, err3 := nodeAddr(e[2])
		if err1 != nil || err2 != nil || err3 != nil || lo < 0 || hi >= int64(len(v.counts)) || lo > hi {
			continue
		}
		n, seen := replicas[addr]
		if !seen {
			if node, ok := nodes[addr]; ok {
				info, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
				if err != nil {
					return // keep the previous view rather than guess
				}
				n = healthyReplicas(info)
			}
			replicas[addr] = n
		}
		for s := lo; s <= hi; s++ {
			v.counts[s] = n
			v.owners[s] = id
		}
	}
	t.view.Store(v)
}

// nodeAddr reads "ip:port" and the node id from a CLUSTER SLOTS node entry
// {ip, port, id, …}.
func nodeAddr(m rueidis.RedisMessage) (addr, id string, err error) {
	f, err := m.ToArray()
	if err != nil || len(f) < 3 {
		return "", "", fmt.Errorf("cluster slots node: %v", err)
	}
	ip, err1 := f[0].ToString()
	port, err2 := f[1].AsInt64()
	id, err3 := f[2].ToString()
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", "", err
	}
	return net.JoinHostPort(ip, strconv.FormatInt(port, 10)), id, nil
}

// healthyReplicas counts the lines "slaveN:ip=…,state=online,offset=…,lag=L"
// of INFO replication with lag at most maxReplicaLag.
func healthyReplicas(info string) uint8 {
	var n uint8
	for line := range strings.Lines(info) {
		k, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "slave") || strings.Trim(k, "slave0123456789") != "" || k == "slave" {
			continue
		}
		online, lag := false, -1
		for kv := range strings.SplitSeq(val, ",") {
			key, value, _ := strings.Cut(kv, "=")
			switch key {
			case "state":
				online = value == "online"
			case "lag":
				lag, _ = strconv.Atoi(value)
			}
		}
		if online && lag >= 0 && lag <= maxReplicaLag && n < 255 {
			n++
		}
	}
	return n
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

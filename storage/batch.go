package storage

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Group commit of the writes that WAIT for replicas (see Store.exec).
//
// Durable writes bound for the same primary that arrive while an earlier
// batch to it is in flight go out together as the next batch, on one
// connection of that node's own client: their scripts, then one WAIT for
// as many replicas as the most demanding of them needs, then CLUSTER MYID.
// A write still counts as done only after a WAIT on the connection that ran
// its script, answered by the node the script says ran it: WAIT covers every
// write made before it on its connection, so one WAIT covers the batch.
//
// A node with nothing in flight sends a write at once, as a batch of one, on
// the caller's goroutine: batching happens only while the node is busy, and
// no timer ever holds a write back. A script answered MOVED, ASK, TRYAGAIN,
// NOSCRIPT or CLUSTERDOWN did not run; that write alone leaves the batch and
// takes the single path of Store.exec (which follows the redirect), the
// others of its batch are acknowledged as the WAIT says.
type groupCommit struct {
	mu     sync.Mutex
	queues map[string]*commitQueue // by the primary's address
}

// commitQueue is one primary's: busy while a batch to it is in flight, and
// the writes waiting for the next.
type commitQueue struct {
	busy    bool
	pending []*durableCall
}

// durableCall is one write of a batch and, once done is closed, its answer.
type durableCall struct {
	ctx        context.Context
	op         string
	sc         durableScript
	keys, args []string
	need       int // replicas this write needs

	vals  []rueidis.RedisMessage
	err   error
	alone bool // the script did not run in the batch: send it on the single path
	// redirected: it was answered MOVED or ASK (counted in WriteStats).
	redirected bool
	done       chan struct{}
}

// maxBatch bounds the writes of one batch; more wait for the next.
const maxBatch = 64

// batched runs a write that needs need replicas in the group commit of the
// slot's primary owner (an id of the topology view). done is false when the
// write must take the single path instead: the view has no address for the
// owner, or its script did not run in the batch (MOVED, ASK and the like;
// redirected when it was MOVED or ASK, counted already).
func (s *Store) batched(ctx context.Context, op string, sc durableScript, keys, args []string, need int, owner string) (vals []rueidis.RedisMessage, done, redirected bool, err error) {
	addr := s.topo.addr(owner)
	if addr == "" {
		return nil, false, false, nil
	}
	c := &durableCall{ctx: ctx, op: op, sc: sc, keys: keys, args: args, need: need, done: make(chan struct{})}
	s.group.submit(addr, c, func(batch []*durableCall) { s.commit(addr, batch) })
	select {
	case <-c.done:
	case <-ctx.Done():
		// Sent or not, the write is not known to be safe: the sender retries.
		s.topo.stale()
		return nil, true, false, unavailable(op, ctx.Err())
	}
	if c.alone {
		return nil, false, c.redirected, nil
	}
	return c.vals, true, false, c.err
}

// submit queues c for the primary at addr. With no batch in flight there, c
// goes out at once as a batch of one on this goroutine; the writes that
// arrived meanwhile go out as the next batch on a goroutine that keeps
// sending while any are waiting.
func (g *groupCommit) submit(addr string, c *durableCall, commit func([]*durableCall)) {
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[string]*commitQueue{}
	}
	q := g.queues[addr]
	if q == nil {
		q = &commitQueue{}
		g.queues[addr] = q
	}
	if q.busy {
		q.pending = append(q.pending, c)
		g.mu.Unlock()
		return
	}
	q.busy = true
	g.mu.Unlock()
	commit([]*durableCall{c})
	if next := g.next(q); next != nil {
		go func() {
			for batch := next; batch != nil; batch = g.next(q) {
				commit(batch)
			}
		}()
	}
}

// next takes the next batch from q, or marks q idle when nothing waits.
func (g *groupCommit) next(q *commitQueue) []*durableCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(q.pending) == 0 {
		q.busy = false
		return nil
	}
	n := min(len(q.pending), maxBatch)
	batch := make([]*durableCall, n)
	copy(batch, q.pending)
	q.pending = append(q.pending[:0], q.pending[n:]...)
	return batch
}

// commit sends one batch to the primary at addr and answers each write.
func (s *Store) commit(addr string, batch []*durableCall) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	node, known := s.client.Nodes()[addr]
	if !known {
		for _, c := range batch {
			c.alone = true
		}
		return
	}
	b := s.client.B()
	sent := make([]*durableCall, 0, len(batch))
	cmds := make([]rueidis.Completed, 0, len(batch)+2)
	need := 0
	var last time.Time // the latest deadline of the writes sent
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = unavailable(c.op, err) // not sent; its caller may have answered already
			continue
		}
		dl, ok := c.ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Minute)
		}
		if dl.After(last) {
			last = dl
		}
		need = max(need, c.need)
		sent = append(sent, c)
		cmds = append(cmds, b.Evalsha().Sha1(c.sc.sha).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build())
	}
	if len(sent) == 0 {
		return
	}
	cmds = append(cmds,
		b.Wait().Numreplicas(int64(need)).Timeout(s.cfg.ReplicaTimeout.Milliseconds()).Build(),
		b.ClusterMyid().Build())
	ctx, cancel := context.WithDeadline(context.Background(), last)
	defer cancel()
	// WAIT is a blocking command: the node's client sends the whole batch
	// on one dedicated connection, and follows no redirect.
	res := node.DoMulti(ctx, cmds...)
	s.stats.batches.Add(1)
	n := len(sent)
	for i, c := range sent {
		if err, ok := rueidis.IsRedisErr(res[i].Error()); ok && notRun(err) {
			_, moved := err.IsMoved()
			_, ask := err.IsAsk()
			if c.redirected = moved || ask; c.redirected {
				s.stats.redirected.Add(1)
			}
			s.topo.stale()
			c.alone = true
			continue
		}
		c.vals, c.err = s.acked(c.op, res[i], res[n], res[n+1], c.need)
	}
}

// notRun reports whether a script's error reply means it did not run (and
// may be sent again): the slot is elsewhere (MOVED, ASK), being migrated
// (TRYAGAIN), the node lacks the script (NOSCRIPT) or cannot serve it
// (CLUSTERDOWN).
func notRun(err *rueidis.RedisError) bool {
	_, moved := err.IsMoved()
	_, ask := err.IsAsk()
	return moved || ask || err.IsTryAgain() || err.IsNoScript() || err.IsClusterDown()
}

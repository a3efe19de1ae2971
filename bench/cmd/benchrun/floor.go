package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/mayfly/mayfly/bench/internal/load"
	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// The Redis floor (RA, RD; RAR, RDR on the replicated cluster): the Redis
// calls of one A request and of one D delivery, made by the packages the
// nodes use (ratelimit, storage, with storage.ClientOption) from 32
// goroutines inside benchrun, with no HTTP, SMTP, MIME or sanitizing in the
// way. What Redis spends per operation here is what those calls cost it at
// this concurrency; A's and D's Redis figures beside them show what the
// servers in front add on Redis's side (nothing but less batching, if they
// match). One more row prices a bare round trip: a GET of one key.
//
//   - A's calls: the client's request-rate counter (INCR + PEXPIRE), then
//     MessagesJSON of a 20-message mailbox (MULTI, TIME, HMGET, XREVRANGE,
//     EXEC), exactly what the edge runs for GET /messages.
//   - D's calls, one message per connection: the connection and first
//     transaction counters (AllowAll of ingest's two rules), the RCPT check
//     (Exists) and Deliver of D's 2 KiB message, parsed once by ingest's
//     parser, each with its own delivery key, into 32 mailboxes already at
//     their 100-message cap, as D's are.
//
// "client CPU per op" is benchrun's own CPU over the run (rueidis and the
// two packages; benchrun does nothing else meanwhile) per operation: the
// part of a node's CPU per operation that is its Redis client.

const floorWorkers = 32

func (b *bench) scenarioFloor(ctx context.Context, st *stack) error {
	name := map[string]string{"A": "RA", "AR": "RAR"}[st.a]
	// Every call has a deadline, as in the nodes (see floorLoad).
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	client, err := rueidis.NewClient(storage.ClientOption(st.redis, 5*time.Second))
	if err != nil {
		return err
	}
	defer client.Close()
	store := storage.New(client, storage.Config{KeyPrefix: "mf"})
	limiter := ratelimit.New(client, ratelimit.Config{KeyPrefix: "mf"})
	raw := load.Message("floor", 2048)
	msg := ingest.NewParser(ingest.ParserConfig{}).Parse(raw)
	var keys atomic.Int64
	deliver := func(ctx context.Context, addr string) error {
		m := msg
		m.Key = storage.DeliveryKey(strconv.AppendInt(raw[:len(raw):len(raw)], keys.Add(1), 10))
		_, err := store.Deliver(ctx, addr, m)
		return err
	}

	// A's mailbox: 20 messages, one session.
	listBox, listSess, err := floorMailbox(ctx, store)
	if err != nil {
		return err
	}
	for range 20 {
		if err := deliver(ctx, listBox); err != nil {
			return err
		}
	}
	if items, _, err := store.MessagesJSON(ctx, listSess, storage.Page{Limit: 20}); err != nil || len(items) != 20 {
		return fmt.Errorf("%s: the list mailbox reads %d messages (%v), want 20", name, len(items), err)
	}
	// D's mailboxes, filled to the cap.
	boxes := make([]string, b.sc.dInboxes)
	for i := range boxes {
		if boxes[i], _, err = floorMailbox(ctx, store); err != nil {
			return err
		}
	}
	full := store.Config().MaxMessages
	if err := load.Parallel(len(boxes)*full, floorWorkers, func(i int) error { return deliver(ctx, boxes[i%len(boxes)]) }); err != nil {
		return err
	}
	conn := ratelimit.Rule{Name: ingest.ConnRuleName, Limit: 60, Window: time.Minute}
	mail := ratelimit.Rule{Name: ingest.MailRuleName, Limit: 120, Window: time.Minute}
	pingKey := "mf:{" + storage.NewTag() + "}:floor"
	if err := client.Do(ctx, client.B().Set().Key(pingKey).Value("1").Ex(10*time.Minute).Build()).Error(); err != nil {
		return err
	}
	clientKey := func(i int64) string {
		n := uint32(i)
		return ratelimit.ClientKey(netip.AddrFrom4([4]byte{198, 18 + byte(n>>16&1), byte(n >> 8), byte(n)}))
	}
	ops := []struct {
		label string
		table bool
		op    func(ctx context.Context, i int64) error
	}{
		{"round trip (GET of one key)", false, func(ctx context.Context, _ int64) error {
			return client.Do(ctx, client.B().Get().Key(pingKey).Build()).Error()
		}},
		{"A's calls", true, func(ctx context.Context, i int64) error {
			if _, err := limiter.AllowRequest(ctx, clientKey(i%16384)); err != nil {
				return err
			}
			_, _, err := store.MessagesJSON(ctx, listSess, storage.Page{Limit: 20})
			return err
		}},
		{"D's calls (1/conn)", true, func(ctx context.Context, i int64) error {
			if _, err := limiter.AllowAll(ctx, clientKey(i), conn, mail); err != nil {
				return err
			}
			addr := boxes[i%int64(len(boxes))]
			if ok, err := store.Exists(ctx, addr); err != nil || !ok {
				return fmt.Errorf("exists %s: %v, %v", addr, ok, err)
			}
			return deliver(ctx, addr)
		}},
	}
	dur := b.sc.httpDur
	for run := range b.sc.runs {
		for _, o := range ops {
			progress("%s run %d/%d: %s, %d goroutines (%s)", name, run+1, b.sc.runs, o.label, floorWorkers, st.shape)
			before, cpu := snapRedis(st.redis), procCPU(os.Getpid())
			n, err := floorLoad(ctx, dur, o.op)
			if err != nil {
				return fmt.Errorf("%s %s: %w", name, o.label, err)
			}
			after, cpuAfter := snapRedis(st.redis), procCPU(os.Getpid())
			f := float64(n)
			b.fig(name, o.label+" ops/s", "ops/s").add(f / dur.Seconds())
			b.fig(name, o.label+" Redis CPU per op", "µs").add((totalCPU(after) - totalCPU(before)) / f * 1e6)
			b.fig(name, o.label+" client CPU per op", "µs").add((cpuAfter - cpu) / f * 1e6)
			if o.table {
				b.recordOps(name, name+" "+o.label, st.shape, perOp(before, after, n))
			}
		}
	}
	return nil
}

// floorMailbox creates a mailbox and selects it, as the API does.
func floorMailbox(ctx context.Context, store *storage.Store) (string, storage.Credential, error) {
	box, scoped, err := store.Create(ctx, storage.NewTag(), "mayfly.test", 30*time.Minute, "198.18.255.255")
	if err != nil {
		return "", storage.Credential{}, err
	}
	_, sess, err := store.Select(ctx, box.ID, scoped)
	return box.Address, sess, err
}

// floorLoad calls op from floorWorkers goroutines for d and returns how many
// calls ended, or the first error. Each call gets a context with a deadline
// of its own, as the nodes give each Redis call (RedisTimeout): rueidis runs
// a dedicated connection used under a context without a deadline in its
// pipelining mode, and then cleans it on every release (UNSUBSCRIBE,
// PUNSUBSCRIBE, SUNSUBSCRIBE, DISCARD: one more round trip per delivery
// that WAITs, which the nodes never pay).
func floorLoad(ctx context.Context, d time.Duration, op func(ctx context.Context, i int64) error) (int, error) {
	var (
		next     atomic.Int64
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for range floorWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				octx, ocancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := op(octx, next.Add(1))
				ocancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), firstErr
}

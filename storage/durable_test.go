package storage_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

// openOn creates a mailbox for 10 minutes in store and selects it.
func openOn(ctx context.Context, t *testing.T, store *storage.Store) (storage.Mailbox, storage.Credential) {
	t.Helper()
	m, scoped, err := store.Create(ctx, storage.NewTag(), domain, 10*time.Minute, "o")
	if err != nil {
		t.Fatal(err)
	}
	_, sess, err := store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatal(err)
	}
	return m, sess
}

// onReplicas opens a mailbox on a store with prefix on a new cluster of 3
// primaries with a replica each. Its tests count batches, acknowledgements
// and publications, not the timeout: 5 s keeps a replica slowed by the rest
// of make test from failing them (StartCluster saw every primary's first
// write acknowledged already; the tests that time the WAIT set their own).
func onReplicas(t *testing.T, prefix string) (*storagetest.Cluster, context.Context, *storage.Store, storage.Mailbox, storage.Credential) {
	t.Helper()
	cluster := storagetest.StartCluster(t, 3, 1)
	store := storage.New(cluster.Client(), storage.Config{KeyPrefix: prefix, ReplicaTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	m, sess := openOn(ctx, t, store)
	return cluster, ctx, store, m, sess
}

func keyedMessage(subject string) storage.NewMessage {
	raw := "Subject: " + subject + "\r\n\r\nbody\r\n"
	return storage.NewMessage{From: "s@example.org", Subject: subject, Status: storage.StatusReady,
		Text: "body", Key: storage.DeliveryKey([]byte(raw))}
}

// A delivery retried with the same raw bytes is acknowledged without a
// second copy while the first is stored; different bytes are always stored.
func TestDeliverIsIdempotent(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMessages: 2})
	m, _, sess := f.open(t, 10*time.Minute)
	ctx := ctxT(t)

	first, err := f.store.Deliver(ctx, m.Address, keyedMessage("a"))
	if err != nil || first.Duplicate {
		t.Fatalf("first delivery: %+v, %v", first, err)
	}
	again, err := f.store.Deliver(ctx, m.Address, keyedMessage("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.ID != first.ID || again.StreamID != first.StreamID {
		t.Fatalf("retry = %+v, want a duplicate of %+v", again, first)
	}
	assertSubjects(t, f, sess, "a")

	// Same Message-ID-less subject, other bytes: another message.
	other := keyedMessage("a")
	other.Key = storage.DeliveryKey([]byte("Subject: a\r\n\r\nanother body\r\n"))
	if s, err := f.store.Deliver(ctx, m.Address, other); err != nil || s.Duplicate {
		t.Fatalf("other bytes: %+v, %v", s, err)
	}
	assertSubjects(t, f, sess, "a,a")

	// The window is the stored life of the first copy: deleted, it can come again.
	if err := f.store.DeleteMessage(ctx, sess, first.ID); err != nil {
		t.Fatal(err)
	}
	if s, err := f.store.Deliver(ctx, m.Address, keyedMessage("a")); err != nil || s.Duplicate || s.ID == first.ID {
		t.Fatalf("after delete: %+v, %v; want a new copy", s, err)
	}
	// Eviction drops the key too: the box holds one delivery key per stored
	// message, nothing of evicted ones.
	f.store.Deliver(ctx, m.Address, keyedMessage("b"))
	f.store.Deliver(ctx, m.Address, keyedMessage("c"))
	assertSubjects(t, f, sess, "c,b")
	assertBoxCounters(t, f, m, 2)
	if _, _, keys := boxMessageFields(t, f, f.prefix+":{"+m.Tag()+"}:box"); keys != 2 {
		t.Errorf("delivery keys = %d, want 2 (one for each stored message)", keys)
	}
	if s, err := f.store.Deliver(ctx, m.Address, keyedMessage("a")); err != nil || s.Duplicate {
		t.Fatalf("evicted key: %+v, %v; want a new copy", s, err)
	}
}

// On a cluster with replicas, a delivery is acknowledged only once a replica
// has it. A frozen replica makes the WAIT (sent on the script's own
// connection) time out: a WAIT on any other connection would count the frozen
// replica's old acknowledgement and pass. The sender's retry, once the
// replica is back, finds the first copy and stores nothing.
func TestDeliverWaitsForAReplica(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	client := cluster.Client()
	prefix := "durable"
	store := storage.New(client, storage.Config{KeyPrefix: prefix, ReplicaTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, sess := openOn(ctx, t, store)
	if _, err := store.Deliver(ctx, m.Address, keyedMessage("healthy")); err != nil {
		t.Fatalf("deliver with a healthy replica: %v", err)
	}

	primary := cluster.PrimaryFor(prefix + ":{" + m.Tag() + "}:box")
	tag := storage.NewTag()
	for cluster.PrimaryFor(prefix+":{"+tag+"}:box") != primary {
		tag = storage.NewTag()
	}
	replica := cluster.ReplicaOf(primary)
	cluster.Stop(replica)
	start := time.Now()
	_, err := store.Deliver(ctx, m.Address, keyedMessage("frozen"))
	if !errors.Is(err, storage.ErrNotReplicated) || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("deliver with a frozen replica: %v, want ErrNotReplicated (an ErrUnavailable)", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("deliver took %v, want about the 300ms replica timeout", took)
	}
	// Creation waits the same way (tag: a slot of the same primary).
	if _, _, err := store.Create(ctx, tag, domain, time.Minute, "o"); !errors.Is(err, storage.ErrNotReplicated) {
		t.Fatalf("create with a frozen replica: %v, want ErrNotReplicated", err)
	}

	cluster.Cont(replica)
	s, err := store.Deliver(ctx, m.Address, keyedMessage("frozen"))
	if err != nil || !s.Duplicate {
		t.Fatalf("retry after the replica is back: %+v, %v; want an acknowledged duplicate", s, err)
	}
	list, _, err := store.Messages(ctx, sess, storage.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Subject != "frozen" || list[1].Subject != "healthy" {
		t.Fatalf("messages = %+v, want frozen, healthy: one copy each", list)
	}

	// A replica the cluster has marked failed is not waited for (auto):
	// deliveries go through again once the failure is detected.
	cluster.Kill(replica)
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		_, err := store.Deliver(ctx, m.Address, keyedMessage("after"+string(rune('a'+i%26))))
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("deliver after the replica died: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With MinReplicas below zero nothing waits, even with a frozen replica.
func TestDeliverNeverWaits(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	client := cluster.Client()
	store := storage.New(client, storage.Config{KeyPrefix: "nowait", MinReplicas: -1})
	ctx := ctxT(t)
	m, _, err := store.Create(ctx, storage.NewTag(), domain, time.Minute, "o")
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop(cluster.ReplicaOf(cluster.PrimaryFor("nowait:{" + m.Tag() + "}:box")))
	if _, err := store.Deliver(ctx, m.Address, keyedMessage("x")); err != nil {
		t.Fatalf("deliver: %v", err)
	}
}

// BenchmarkDurableWrites measures what waiting for a replica costs a
// creation and a delivery on a 3+3 cluster on loopback.
func BenchmarkDurableWrites(b *testing.B) {
	cluster := storagetest.StartCluster(b, 3, 1)
	client := cluster.Client()
	for _, mode := range []struct {
		name string
		min  int
	}{{"wait", 0}, {"nowait", -1}} {
		store := storage.New(client, storage.Config{KeyPrefix: "bench", MinReplicas: mode.min})
		ctx := context.Background()
		b.Run("create/"+mode.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := store.Create(ctx, storage.NewTag(), domain, time.Minute, "o"); err != nil {
					b.Fatal(err)
				}
			}
		})
		m, _, err := store.Create(ctx, storage.NewTag(), domain, time.Minute, "o")
		if err != nil {
			b.Fatal(err)
		}
		b.Run("deliver/"+mode.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				if _, err := store.Deliver(ctx, m.Address, keyedMessage(strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A slot moves to another primary while the client still routes it to the
// old one: the script is answered MOVED and runs on the new owner, and the
// WAIT must run there too. The new owner's replica is frozen, so only a WAIT
// on the new owner fails; the WAIT of the old owner, whose replica is
// healthy, would pass at once (that is the bug: rueidis resent the script
// alone and left the WAIT of the same DoMulti with the old node).
func TestDeliverWaitsOnTheNodeThatRanTheScript(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	opt := storage.ClientOption(cluster.Addrs(), 2*time.Second)
	opt.ClusterOption.ShardsRefreshInterval = 0 // only a redirect teaches it the new owner
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	prefix := "moved"
	store := storage.New(client, storage.Config{KeyPrefix: prefix, ReplicaTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two mailboxes in two slots of one primary: one is moved while its
	// new owner's replica is frozen, the other while it is healthy.
	m1, scoped1, err := store.Create(ctx, storage.NewTag(), domain, 10*time.Minute, "o")
	if err != nil {
		t.Fatal(err)
	}
	key := func(m storage.Mailbox) string { return prefix + ":{" + m.Tag() + "}:box" }
	from := cluster.PrimaryFor(key(m1))
	var m2 storage.Mailbox
	for m2.Address == "" || cluster.PrimaryFor(key(m2)) != from || cluster.Redis(from, "CLUSTER", "KEYSLOT", key(m2)) == cluster.Redis(from, "CLUSTER", "KEYSLOT", key(m1)) {
		if m2, _, err = store.Create(ctx, storage.NewTag(), domain, 10*time.Minute, "o"); err != nil {
			t.Fatal(err)
		}
	}
	_, sess1, err := store.Select(ctx, m1.ID, scoped1)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []storage.Mailbox{m1, m2} {
		if _, err := store.Deliver(ctx, m.Address, keyedMessage("before")); err != nil {
			t.Fatalf("deliver before the move: %v", err)
		}
	}
	var to string
	var primaries []string
	for _, a := range cluster.Addrs() {
		if strings.HasPrefix(cluster.Redis(a, "ROLE"), "master") {
			primaries = append(primaries, a)
			if a != from {
				to = a
			}
		}
	}
	if to == "" {
		t.Fatal("no other primary")
	}
	before := store.WriteStats()

	cluster.SetNodeTimeout(time.Minute) // the replica counts while frozen (SetNodeTimeout)
	cluster.Stop(cluster.ReplicaOf(to))
	moveSlot(t, cluster, primaries, cluster.Redis(from, "CLUSTER", "KEYSLOT", key(m1)), from, to)
	_, err = store.Deliver(ctx, m1.Address, keyedMessage("moved"))
	if !errors.Is(err, storage.ErrNotReplicated) {
		t.Fatalf("deliver to a moved slot whose new owner's replica is frozen: %v, want ErrNotReplicated", err)
	}
	cluster.Cont(cluster.ReplicaOf(to))

	// Healthy: acknowledged after a WAIT on the new owner.
	moveSlot(t, cluster, primaries, cluster.Redis(from, "CLUSTER", "KEYSLOT", key(m2)), from, to)
	if s, err := store.Deliver(ctx, m2.Address, keyedMessage("moved")); err != nil || s.Duplicate {
		t.Fatalf("deliver to a moved slot, healthy replica: %+v, %v", s, err)
	}
	after := store.WriteStats()
	if got := after.Redirected - before.Redirected; got != 2 {
		t.Errorf("redirected writes = %d, want 2 (both slots moved behind the client's back)", got)
	}
	if got := after.AckedWaited - before.AckedWaited; got != 1 {
		t.Errorf("acknowledged after WAIT = %d, want 1", got)
	}
	// The refused one is stored once, on its new owner, when retried.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := store.Deliver(ctx, m1.Address, keyedMessage("moved"))
		if err == nil {
			if !s.Duplicate {
				t.Errorf("retry stored a second copy: %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry after the replica is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	list, _, err := store.Messages(ctx, sess1, storage.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Subject != "moved" || list[1].Subject != "before" {
		t.Fatalf("messages = %+v, want moved, before: one copy each", list)
	}
}

// moveSlot migrates slot from one primary to another as redis-cli --cluster
// reshard does (IMPORTING, MIGRATING, MIGRATE every key, SETSLOT NODE on
// every primary), without telling any client.
func moveSlot(t *testing.T, c *storagetest.Cluster, primaries []string, slot, from, to string) {
	t.Helper()
	fromID, toID := c.Redis(from, "CLUSTER", "MYID"), c.Redis(to, "CLUSTER", "MYID")
	c.Redis(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	c.Redis(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	host, port, _ := strings.Cut(to, ":")
	for {
		keys := strings.Fields(c.Redis(from, "CLUSTER", "GETKEYSINSLOT", slot, "100"))
		if len(keys) == 0 {
			break
		}
		if out := c.Redis(from, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...); out != "OK" {
			t.Fatalf("MIGRATE: %s", out)
		}
	}
	for _, a := range primaries {
		c.Redis(a, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	}
}

// Only the delivery script's own "no mailbox" ({0}) is a permanent
// ErrMailboxNotFound (550 5.1.1, the sender bounces the mail). Any other
// reply that is not a delivery (a script changed under us, a proxy's
// rewrite) is ErrUnavailable: the sender retries instead of bouncing.
func TestDeliverMalformedReplyIsTemporary(t *testing.T) {
	f := newFixture(t, storage.Config{})
	m, _, _ := f.open(t, 10*time.Minute)
	ctx := ctxT(t)
	for _, c := range []struct {
		script string
		want   error
	}{
		{"return {0, node_id()}", storage.ErrMailboxNotFound},
		{"return {3, '1-0', 'x', node_id()}", storage.ErrUnavailable},
		{"return {1, '1-0', node_id()}", storage.ErrUnavailable},
		{"return {0, 'extra', node_id()}", storage.ErrUnavailable},
		{"return {'1', '1-0', 'x', node_id()}", storage.ErrUnavailable},
	} {
		storage.SetDeliverScript(f.store, c.script)
		_, err := f.store.Deliver(ctx, m.Address, keyedMessage("x"))
		if !errors.Is(err, c.want) || (c.want == storage.ErrUnavailable && errors.Is(err, storage.ErrMailboxNotFound)) {
			t.Errorf("script %q: Deliver = %v, want %v", c.script, err, c.want)
		}
	}
}

// With two replicas per primary, a write waits for both: WAIT 1 would be
// answered by either, and the majority may promote the other (the partition
// {primary, R2} | {R1, majority}; deploy/topology's two-replica drill). One
// frozen replica of two makes the delivery fail, where WAIT 1 passed.
func TestDeliverWaitsForEveryReplica(t *testing.T) {
	prefix := "every"
	cluster, store, m, ctx := replicated(t, 2, prefix)
	if _, err := store.Deliver(ctx, m.Address, keyedMessage("healthy")); err != nil {
		t.Fatalf("deliver with both replicas healthy: %v", err)
	}
	replicas := cluster.ReplicasOf(cluster.PrimaryFor(prefix + ":{" + m.Tag() + "}:box"))
	if len(replicas) != 2 {
		t.Fatalf("replicas %v, want 2", replicas)
	}
	cluster.SetNodeTimeout(time.Minute) // the replica counts while frozen (SetNodeTimeout)
	cluster.Stop(replicas[1])
	if _, err := store.Deliver(ctx, m.Address, keyedMessage("one frozen")); !errors.Is(err, storage.ErrNotReplicated) {
		t.Fatalf("deliver with one of two replicas frozen: %v, want ErrNotReplicated", err)
	}
	// MinReplicas is a floor: with 1, both listed replicas are still waited for.
	one := storage.New(cluster.Client(), storage.Config{KeyPrefix: prefix, MinReplicas: 1, ReplicaTimeout: 300 * time.Millisecond})
	if _, err := one.Deliver(ctx, m.Address, keyedMessage("one frozen")); !errors.Is(err, storage.ErrNotReplicated) {
		t.Fatalf("MinReplicas 1, one of two replicas frozen: %v, want ErrNotReplicated", err)
	}
	cluster.Cont(replicas[1])
	if s, err := store.Deliver(ctx, m.Address, keyedMessage("one frozen")); err != nil || !s.Duplicate {
		t.Fatalf("retry with both back: %+v, %v; want an acknowledged duplicate", s, err)
	}
}

// A view that says "no replica" is read again before a write trusts it
// once it is older than a second: a replica flagged failed (so the view
// counts 0) that comes back is waited for at the next write, not after it.
// Here it comes back and the view ages: the next delivery must WAIT for
// it, where the old view let it through unreplicated (and only started a
// refresh for the writes after it).
func TestDeliverReadsAStaleViewBeforeSkippingTheWait(t *testing.T) {
	prefix := "stale"
	cluster, store, m, ctx := replicated(t, 1, prefix)
	primary := cluster.PrimaryFor(prefix + ":{" + m.Tag() + "}:box")
	replica := cluster.ReplicaOf(primary)
	// everyNode waits until every other node sees the replica flagged
	// failed (or not): the view is read from any of them.
	everyNode := func(failed bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			agree := true
			for _, a := range cluster.Addrs() {
				if a == replica {
					continue
				}
				for line := range strings.Lines(cluster.Redis(a, "CLUSTER", "NODES")) {
					if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[1], replica+"@") {
						agree = agree && slices.Contains(strings.Split(f[2], ","), "fail") == failed
					}
				}
			}
			if agree {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the nodes do not agree that %s is failed=%v after 20 s", replica, failed)
			}
		}
	}

	cluster.Stop(replica)
	everyNode(true)
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ { // acknowledged alone once the view has the flag
		if _, err := store.Deliver(ctx, m.Address, keyedMessage("alone"+strconv.Itoa(i))); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("deliveries still refused 15 s after the replica was flagged failed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cluster.Cont(replica)
	everyNode(false)
	time.Sleep(1200 * time.Millisecond) // the view (no replica) is now older than a second
	before := store.WriteStats()
	if _, err := store.Deliver(ctx, m.Address, keyedMessage("back")); err != nil {
		t.Fatalf("deliver after the replica came back: %v", err)
	}
	after := store.WriteStats()
	if after.AckedWaited != before.AckedWaited+1 || after.AckedNoWait != before.AckedNoWait {
		t.Fatalf("deliver after the replica came back: write stats %+v then %+v; want it acknowledged after a WAIT, not without", before, after)
	}
}

// replicated starts a cluster of 3 primaries with replicas each, and a
// store on it (prefix, replica timeout 300 ms) with one mailbox, created
// once the replicas acknowledge (a cluster just formed may take a moment);
// ctx lasts a minute.
func replicated(t *testing.T, replicas int, prefix string) (*storagetest.Cluster, *storage.Store, storage.Mailbox, context.Context) {
	t.Helper()
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, replicas)
	store := storage.New(cluster.Client(), storage.Config{KeyPrefix: prefix, ReplicaTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m, _, err := store.Create(ctx, storage.NewTag(), domain, 10*time.Minute, "o")
		if err == nil {
			return cluster, store, m, ctx
		}
		if time.Now().After(deadline) {
			t.Fatalf("create: %v", err)
		}
	}
}

// An ACL user without CLUSTER INFO, CLUSTER NODES and CLUSTER MYID (as some
// managed services hand out) cannot read the replica view. That is not a
// standalone server ("cluster support disabled" is the only answer that
// means one): a write is refused (ErrUnavailable: 451, 503) rather than
// acknowledged without WAIT, and the failure is counted and logged.
func TestDeliverRefusesWhenTheViewIsUnreadable(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	const user, password = "mayfly-noview", "acl-test-password-7f3a"
	for _, a := range cluster.Addrs() {
		if out := cluster.Redis(a, "ACL", "SETUSER", user, "on", ">"+password, "~*", "&*", "+@all",
			"-cluster|info", "-cluster|nodes", "-cluster|myid"); out != "OK" {
			t.Fatalf("ACL SETUSER on %s: %s", a, out)
		}
	}
	t.Cleanup(func() {
		for _, a := range cluster.Addrs() {
			cluster.Redis(a, "ACL", "DELUSER", user)
		}
	})
	opt := storage.ClientOption(cluster.Addrs(), 2*time.Second)
	opt.Username, opt.Password = user, password
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	// No view is ever read, so every refresh runs in the caller (none in
	// the background): the log is written by this goroutine only.
	var logs strings.Builder
	prefix := "noview"
	store := storage.New(client, storage.Config{KeyPrefix: prefix, ReplicaTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The user really lacks it.
	if err := client.Do(ctx, client.B().ClusterInfo().Build()).Error(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("CLUSTER INFO as %s: %v, want NOPERM", user, err)
	}
	tag := storage.NewTag()
	cluster.Stop(cluster.ReplicaOf(cluster.PrimaryFor(prefix + ":{" + tag + "}:box")))
	if _, _, err := store.Create(ctx, tag, domain, time.Minute, "o"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("create with the view unreadable and the replica frozen: %v, want ErrUnavailable", err)
	}
	w := store.WriteStats()
	if w.AckedNoWait != 0 || w.Refused != 1 || w.ViewRefreshFailures < 1 {
		t.Errorf("write stats %+v, want 0 acknowledged without WAIT, 1 refused, at least 1 view refresh failure", w)
	}
	if got := logs.String(); !strings.Contains(got, "replica view unreadable") || !strings.Contains(got, "NOPERM") || strings.Contains(got, password) {
		t.Errorf("logs = %q, want the unreadable view with its NOPERM, without the password", got)
	}
}

// A group commit where one script's slot is owned by another primary: that
// script is answered MOVED and did not run; it alone is sent again (to its
// owner, after a WAIT there), and the others of the batch are acknowledged
// after the batch's one WAIT on the node that ran them. Each message is
// stored once.
func TestGroupCommitMovedScriptAlone(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	prefix := "batch"
	store := storage.New(cluster.Client(), storage.Config{KeyPrefix: prefix, ReplicaTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := func(m storage.Mailbox) string { return prefix + ":{" + m.Tag() + "}:box" }

	// Three mailboxes on one primary, and one on another in the middle of
	// the batch.
	var here []storage.Mailbox
	var there storage.Mailbox
	var primary string
	sessions := map[string]storage.Credential{}
	for len(here) < 3 || there.Address == "" {
		m, scoped, err := store.Create(ctx, storage.NewTag(), domain, 10*time.Minute, "o")
		if err != nil {
			t.Fatal(err)
		}
		switch at := cluster.PrimaryFor(key(m)); {
		case primary == "" || at == primary:
			if len(here) == 3 {
				continue
			}
			primary = at
			here = append(here, m)
		case there.Address == "":
			there = m
		default:
			continue
		}
		if _, sessions[m.Address], err = store.Select(ctx, m.ID, scoped); err != nil {
			t.Fatal(err)
		}
	}
	boxes := []storage.Mailbox{here[0], here[1], there, here[2]}
	addrs := make([]string, len(boxes))
	msgs := make([]storage.NewMessage, len(boxes))
	for i, m := range boxes {
		addrs[i] = m.Address
		msgs[i] = keyedMessage("batched " + strconv.Itoa(i))
	}

	before := store.WriteStats()
	sums, errs := storage.DeliverBatchOn(ctx, store, primary, 1, addrs, msgs)
	after := store.WriteStats()
	for i, err := range errs {
		if err != nil || sums[i].Duplicate || sums[i].StreamID == "" {
			t.Errorf("delivery %d (%s): %+v, %v; want stored and acknowledged", i, boxes[i].Address, sums[i], err)
		}
	}
	if got := after.Redirected - before.Redirected; got != 1 {
		t.Errorf("redirected = %d, want 1 (the script of the other primary's slot)", got)
	}
	if got := after.AckedWaited - before.AckedWaited; got != 4 {
		t.Errorf("acknowledged after WAIT = %d, want 4", got)
	}
	if got := after.Refused - before.Refused; got != 0 {
		t.Errorf("refused = %d, want 0", got)
	}
	for i, m := range boxes {
		list, _, err := store.Messages(ctx, sessions[m.Address], storage.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Subject != msgs[i].Subject || list[0].ID != sums[i].ID {
			t.Errorf("mailbox %d lists %+v, want its one message %q", i, list, msgs[i].Subject)
		}
	}
}

// Writes to one primary that arrive while a batch is in flight go out
// together: 48 concurrent deliveries take fewer batches than deliveries,
// and each is acknowledged after a WAIT and stored once. One delivery at a
// time on an idle node is a batch of its own, sent at once.
func TestGroupCommitBatchesWhileBusy(t *testing.T) {
	t.Parallel()
	_, ctx, store, m, sess := onReplicas(t, "group")

	before := store.WriteStats()
	for i := range 5 {
		if _, err := store.Deliver(ctx, m.Address, keyedMessage("alone "+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	after := store.WriteStats()
	if b, w := after.Batches-before.Batches, after.AckedWaited-before.AckedWaited; b != 5 || w != 5 {
		t.Errorf("one at a time: %d batches for %d acknowledged writes, want 5 and 5", b, w)
	}

	const n = 48
	before = after
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = store.Deliver(ctx, m.Address, keyedMessage("together "+strconv.Itoa(i)))
		})
	}
	close(start)
	wg.Wait()
	after = store.WriteStats()
	for i, err := range errs {
		if err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	b, w := after.Batches-before.Batches, after.AckedWaited-before.AckedWaited
	if w != n || b >= n {
		t.Errorf("concurrent: %d batches for %d acknowledged writes, want %d writes in fewer batches", b, w, n)
	}
	t.Logf("%d concurrent deliveries in %d batches", w, b)
	list, _, err := store.Messages(ctx, sess, storage.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5+n {
		t.Errorf("%d messages listed, want %d (each stored once)", len(list), 5+n)
	}
}

// A write whose deadline has passed before its batch goes out is not sent
// and is answered ErrUnavailable, never as done.
func TestGroupCommitExpiredWrite(t *testing.T) {
	t.Parallel()
	_, ctx, store, m, sess := onReplicas(t, "expired")
	gone, stop := context.WithCancel(ctx)
	stop()
	for i := range 20 {
		if s, err := store.Deliver(gone, m.Address, keyedMessage("late "+strconv.Itoa(i))); !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("deliver %d with a cancelled context: %+v, %v; want ErrUnavailable", i, s, err)
		}
	}
	if list, _, err := store.Messages(ctx, sess, storage.Page{Limit: 10}); err != nil || len(list) != 0 {
		t.Fatalf("messages = %+v, %v; want none stored", list, err)
	}
}

// A select, an extension and both deletes are acknowledged only once a
// replica has them, as deliveries are: with the replica frozen each is
// ErrNotReplicated (the API's 503, which clients retry), never a 200 that a
// failover could take back (a session that then answers 401, a deleted
// message or inbox that comes back). The four run at once, on four
// mailboxes of one primary, under a node timeout long enough that the
// cluster does not flag the frozen replica failed meanwhile (a replica
// flagged failed is not waited for). With the replica back, each goes
// through.
func TestSessionChangesWaitForAReplica(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	prefix := "durable-session"
	store := storage.New(cluster.Client(), storage.Config{KeyPrefix: prefix, ReplicaTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type box struct {
		m      storage.Mailbox
		scoped storage.Credential
		sess   storage.Credential
		msg    storage.Summary
	}
	var primary string
	open := func() box {
		t.Helper()
		tag := storage.NewTag()
		for primary != "" && cluster.PrimaryFor(prefix+":{"+tag+"}:box") != primary {
			tag = storage.NewTag()
		}
		primary = cluster.PrimaryFor(prefix + ":{" + tag + "}:box")
		m, scoped, err := store.Create(ctx, tag, domain, 10*time.Minute, "o")
		if err != nil {
			t.Fatal(err)
		}
		_, sess, err := store.Select(ctx, m.ID, scoped)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := store.Deliver(ctx, m.Address, keyedMessage("one"))
		if err != nil {
			t.Fatal(err)
		}
		return box{m, scoped, sess, msg}
	}
	boxes := []box{open(), open(), open(), open(), open()}
	ops := map[string]func(b box) error{
		"select":         func(b box) error { _, _, err := store.Select(ctx, b.m.ID, b.scoped); return err },
		"extend":         func(b box) error { _, _, err := store.Extend(ctx, b.sess, time.Minute); return err },
		"delete message": func(b box) error { return store.DeleteMessage(ctx, b.sess, b.msg.ID) },
		"destroy":        func(b box) error { _, err := store.Destroy(ctx, b.sess); return err },
	}
	names := []string{"select", "extend", "delete message", "destroy"}
	replica := cluster.ReplicaOf(primary)
	before := store.WriteStats().Refused
	cluster.SetNodeTimeout(time.Minute) // the replica counts while frozen (SetNodeTimeout)
	cluster.Stop(replica)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = ops[name](boxes[i]) }()
	}
	wg.Wait()
	cluster.Cont(replica)
	for i, name := range names {
		if !errors.Is(errs[i], storage.ErrNotReplicated) || !errors.Is(errs[i], storage.ErrUnavailable) {
			t.Errorf("%s with a frozen replica: %v, want ErrNotReplicated (an ErrUnavailable)", name, errs[i])
		}
	}
	if got := store.WriteStats().Refused - before; got != int64(len(names)) {
		t.Errorf("WriteStats().Refused grew by %d, want %d", got, len(names))
	}
	// With the replica back (it catches up first: the API's clients retry
	// a 503 meanwhile), on the fifth mailbox.
	for _, name := range names {
		deadline := time.Now().Add(15 * time.Second)
		for retried := false; ; retried = true {
			err := ops[name](boxes[4])
			// A retried delete finds done what the refused attempt did on
			// the primary.
			if err == nil || retried && (errors.Is(err, storage.ErrMessageNotFound) || errors.Is(err, storage.ErrSessionInvalid)) {
				break
			}
			if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("%s with the replica back: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// An answer of a durable write that finds nothing to do ("no such message",
// "session invalid") may rest on a delete its primary has not replicated:
// a client retrying a delete whose acknowledgement timed out must not be
// told it is done while the delete can still be lost. Here the first try
// of each delete meets a frozen replica (ErrNotReplicated, done on the
// primary only), and the retry comes on another client's fresh
// connections, which wrote nothing. Redis's WAIT there still waits for the
// primary's whole replication stream (Redis 7.0.15: a fresh connection's
// WAIT 1 300 against a frozen replica waits 300 ms and answers 0), so the
// retry is ErrNotReplicated too. This test holds the durability of such
// answers to that behaviour of the Redis it runs on: a Redis whose WAIT
// answered at once here would need those scripts to write something first.
func TestRetriedDeletesWaitForTheDelete(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 1)
	prefix := "durable-fence"
	cfg := storage.Config{KeyPrefix: prefix, ReplicaTimeout: 200 * time.Millisecond}
	first := storage.New(cluster.Client(), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var primary string
	open := func() (storage.Credential, storage.Summary) {
		t.Helper()
		tag := storage.NewTag()
		for primary != "" && cluster.PrimaryFor(prefix+":{"+tag+"}:box") != primary {
			tag = storage.NewTag()
		}
		primary = cluster.PrimaryFor(prefix + ":{" + tag + "}:box")
		m, scoped, err := first.Create(ctx, tag, domain, 10*time.Minute, "o")
		if err != nil {
			t.Fatal(err)
		}
		_, sess, err := first.Select(ctx, m.ID, scoped)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := first.Deliver(ctx, m.Address, keyedMessage("one"))
		if err != nil {
			t.Fatal(err)
		}
		return sess, msg
	}
	sess1, msg1 := open()
	sess2, _ := open()
	retry := storage.New(cluster.Client(), cfg)
	both := func(s *storage.Store) (deleteMessage, destroy error) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); deleteMessage = s.DeleteMessage(ctx, sess1, msg1.ID) }()
		go func() { defer wg.Done(); _, destroy = s.Destroy(ctx, sess2) }()
		wg.Wait()
		return
	}
	replica := cluster.ReplicaOf(primary)
	// The frozen replica must still count when the retry reads its replica
	// view: with the one-second timeout, a retry slowed by a loaded machine
	// read a view in which the cluster had flagged the replica failed, and
	// skipped the WAIT (as every write does then).
	cluster.SetNodeTimeout(time.Minute)
	cluster.Stop(replica)
	dm, de := both(first)
	dm2, de2 := both(retry)
	cluster.Cont(replica)
	for what, err := range map[string]error{"delete message": dm, "destroy": de} {
		if !errors.Is(err, storage.ErrNotReplicated) {
			t.Fatalf("%s with a frozen replica: %v, want ErrNotReplicated", what, err)
		}
	}
	for what, err := range map[string]error{"retried delete message": dm2, "retried destroy": de2} {
		if !errors.Is(err, storage.ErrNotReplicated) {
			t.Errorf("%s while the replica lacks the delete: %v, want ErrNotReplicated (not done yet)", what, err)
		}
	}
}

package storage_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// deliver.lua publishes a message event only while its primary has a
// subscriber to the mailbox's channel: with none, the primary sends its
// replicas nothing over the cluster bus (no publishshard message, one
// wake-up less for each replica per delivery); with the edge's Receiver
// subscribed, every delivery is published there and reaches it.
func TestDeliverPublishesOnlyToASubscriber(t *testing.T) {
	t.Parallel()
	cluster, ctx, store, m, _ := onReplicas(t, "pub")
	ch := store.Channel(m.Tag())
	primary := cluster.PrimaryFor(ch)
	replica := cluster.ReplicaOf(primary)
	stat := func(addr, name string) int {
		t.Helper()
		for line := range strings.Lines(cluster.Redis(addr, "CLUSTER", "INFO")) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("CLUSTER INFO %s: %q", name, line)
				}
				return n
			}
		}
		return 0 // listed once it is not zero
	}
	sent := func() int { return stat(primary, "cluster_stats_messages_publishshard_sent") }
	received := func() int { return stat(replica, "cluster_stats_messages_publishshard_received") }

	sent0, received0 := sent(), received()
	for i := range 5 {
		if _, err := store.Deliver(ctx, m.Address, keyedMessage("unseen"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := sent() - sent0; got != 0 {
		t.Errorf("with no subscriber the primary sent %d publications to its replica, want 0", got)
	}

	events := make(chan storage.Event, 10)
	subscribed := make(chan struct{}, 10)
	stop := store.Listen(m.Tag(), func(ev storage.Event) { events <- ev }, func() { subscribed <- struct{}{} })
	defer stop()
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("no subscription confirmed")
	}
	sum, err := store.Deliver(ctx, m.Address, keyedMessage("seen"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Type != storage.EventMessage || ev.Message.ID != sum.ID {
			t.Fatalf("event %+v, want the message %s", ev, sum.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for a delivery with a subscriber")
	}
	if got := sent() - sent0; got != 1 {
		t.Errorf("with a subscriber the primary sent %d publications, want 1", got)
	}
	// The replica reads it over the bus (its own count, by gossip time).
	deadline := time.Now().Add(5 * time.Second)
	for received()-received0 != 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := received() - received0; got != 1 {
		t.Errorf("the replica received %d publications, want 1", got)
	}
}

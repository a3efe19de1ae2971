package storage_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

// The Receiver delivers a mailbox's events in order and confirms each
// subscription; when the channel's slot moves to another primary (the
// server drops the subscription) it subscribes there and confirms again,
// and events published there arrive; stop unsubscribes.
func TestReceiverFollowsSlotMove(t *testing.T) {
	t.Parallel()
	cluster := storagetest.StartCluster(t, 3, 0)
	client := cluster.Client()
	store := storage.New(client, storage.Config{KeyPrefix: "recv"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tag := storage.NewTag()
	ch := store.Channel(tag)
	events := make(chan storage.Event, 100)
	subscribed := make(chan struct{}, 10)
	stop := store.Listen(tag, func(ev storage.Event) { events <- ev }, func() { subscribed <- struct{}{} })
	confirmed := func(what string) {
		t.Helper()
		select {
		case <-subscribed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no subscription confirmed %s", what)
		}
	}
	publish := func(token string) {
		t.Helper()
		payload := `{"type":"takeover","token":"` + token + `"}`
		if err := client.Do(ctx, client.B().Spublish().Channel(ch).Message(payload).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(tokens ...string) {
		t.Helper()
		for _, want := range tokens {
			select {
			case ev := <-events:
				if ev.Type != storage.EventTakeover || ev.Token != want {
					t.Fatalf("event %+v, want takeover %s", ev, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no event %s", want)
			}
		}
	}
	confirmed("at first")
	var tokens []string
	for i := range 20 {
		tokens = append(tokens, "a"+strconv.Itoa(i))
		publish(tokens[i])
	}
	receive(tokens...)

	from := cluster.PrimaryFor(ch)
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
	moveSlot(t, cluster, primaries, cluster.Redis(from, "CLUSTER", "KEYSLOT", ch), from, to)
	confirmed("after the slot moved")
	if n := shardSubscribers(t, cluster, to, ch); n != 1 {
		t.Errorf("%s has %d subscribers of the moved channel, want 1", to, n)
	}
	publish("b")
	receive("b")

	stop()
	deadline := time.Now().Add(5 * time.Second)
	for shardSubscribers(t, cluster, to, ch) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("still subscribed after stop")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shardSubscribers(t *testing.T, c *storagetest.Cluster, addr, ch string) int {
	t.Helper()
	f := strings.Fields(c.Redis(addr, "PUBSUB", "SHARDNUMSUB", ch))
	if len(f) != 2 {
		t.Fatalf("PUBSUB SHARDNUMSUB: %v", f)
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

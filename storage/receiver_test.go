package storage_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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

// ReadStreams answers as one ReadStream per request would, in the order of
// the requests, for mailboxes on every primary; a request whose token was
// replaced or whose session is gone gets ReadStream's errors; and a node
// that lost the script (SCRIPT FLUSH) still answers.
func TestReadStreamsIsReadStreamBatched(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	var reqs []storage.StreamReadReq
	for i := range 9 {
		m, _, sess := f.open(t, 10*time.Minute)
		start, err := f.store.OpenStream(ctx, sess, "tok"+strconv.Itoa(i), uuid.Nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		for j := range i % 3 {
			if _, err := f.store.Deliver(ctx, m.Address, keyedMessage("m"+strconv.Itoa(i)+"-"+strconv.Itoa(j))); err != nil {
				t.Fatal(err)
			}
		}
		reqs = append(reqs, storage.StreamReadReq{Session: sess, Token: "tok" + strconv.Itoa(i), AfterID: start.LastID})
	}
	reqs[4].Token = "another" // replaced
	_, _, sess := f.open(t, 10*time.Minute)
	if _, err := f.store.Destroy(ctx, sess); err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, storage.StreamReadReq{Session: sess, Token: "x", AfterID: "0-0"}) // gone
	check := func(what string) {
		t.Helper()
		got := f.store.ReadStreams(ctx, reqs, 10)
		if len(got) != len(reqs) {
			t.Fatalf("%s: %d results for %d requests", what, len(got), len(reqs))
		}
		for i, r := range reqs {
			want, werr := f.store.ReadStream(ctx, r.Session, r.Token, r.AfterID, 10)
			if !errors.Is(got[i].Err, werr) && (got[i].Err == nil || werr == nil || got[i].Err.Error() != werr.Error()) {
				t.Errorf("%s: request %d: error %v, ReadStream's %v", what, i, got[i].Err, werr)
				continue
			}
			if len(got[i].Read.Messages) != len(want.Messages) || got[i].Read.Node != want.Node || !got[i].Read.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("%s: request %d: %+v, ReadStream's %+v", what, i, got[i].Read, want)
			}
			for j := range want.Messages {
				if got[i].Read.Messages[j].ID != want.Messages[j].ID {
					t.Errorf("%s: request %d message %d: %v, want %v", what, i, j, got[i].Read.Messages[j].ID, want.Messages[j].ID)
				}
			}
		}
		if !errors.Is(got[4].Err, storage.ErrStreamReplaced) || !errors.Is(got[len(got)-1].Err, storage.ErrSessionInvalid) {
			t.Errorf("%s: replaced: %v, gone: %v", what, got[4].Err, got[len(got)-1].Err)
		}
		if n := len(got[2].Read.Messages); n != 2 {
			t.Errorf("%s: request 2 read %d messages, want 2", what, n)
		}
	}
	check("with the script loaded")
	for _, n := range f.client.Nodes() {
		if err := n.Do(ctx, n.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	check("after SCRIPT FLUSH")
}

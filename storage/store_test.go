package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

const domain = "mayfly.test"

type fixture struct {
	store  *storage.Store
	client rueidis.Client
	prefix string
}

func newFixture(t *testing.T, cfg storage.Config) fixture {
	t.Helper()
	t.Parallel()
	client := storagetest.Client(t)
	cfg.KeyPrefix = storagetest.Prefix(t)
	return fixture{store: storage.New(client, cfg), client: client, prefix: cfg.KeyPrefix}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open creates a mailbox and selects it, returning the mailbox, its scoped
// credential and a session.
func (f fixture) open(t *testing.T, lifetime time.Duration) (storage.Mailbox, storage.Credential, storage.Credential) {
	t.Helper()
	ctx := ctxT(t)
	m, scoped, err := f.store.Create(ctx, storage.NewTag(), domain, lifetime, "owner-1")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, sess, err := f.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	return m, scoped, sess
}

func (f fixture) deliver(t *testing.T, addr, subject string) storage.Summary {
	t.Helper()
	s, err := f.store.Deliver(ctxT(t), addr, storage.NewMessage{
		From: "Sender <s@example.org>", Subject: subject, Status: storage.StatusReady,
		Text: "text of " + subject, HTML: "<p>" + subject + "</p>",
	})
	if err != nil {
		t.Fatalf("Deliver %q: %v", subject, err)
	}
	return s
}

// pttls returns the remaining TTL in ms of every key of the test's prefix.
func (f fixture) pttls(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, k := range storagetest.Leftovers(t, f.prefix) {
		ms, err := f.client.Do(ctxT(t), f.client.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		out[k] = ms
	}
	return out
}

func TestCreateSelectCurrent(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	tag := storage.NewTag()
	m, scoped, err := f.store.Create(ctx, tag, "Mayfly.Test", 10*time.Minute, "owner-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Address, tag+"@mayfly.test"; got != want {
		t.Errorf("Address = %q, want %q", got, want)
	}
	if got, want := m.ExpiresAt.Sub(m.CreatedAt), 10*time.Minute; got != want {
		t.Errorf("lifetime = %v, want %v", got, want)
	}
	if got, want := m.MaxExpiresAt.Sub(m.CreatedAt), storage.MaxLifetime; got != want {
		t.Errorf("max lifetime = %v, want %v", got, want)
	}
	if d := time.Since(m.CreatedAt); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("CreatedAt %v is not the server's now", m.CreatedAt)
	}
	if strings.Contains(scoped.String(), "\n") || !strings.HasPrefix(scoped.String(), tag+".") {
		t.Errorf("credential %q does not carry the tag", scoped.String())
	}

	got, sess, err := f.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatal(err)
	}
	if got != m {
		t.Errorf("Select = %+v, want %+v", got, m)
	}
	cur, err := f.store.Current(ctx, sess)
	if err != nil {
		t.Fatal(err)
	}
	if cur != m {
		t.Errorf("Current = %+v, want %+v", cur, m)
	}
	// The scoped credential is not a session, and a session is not a scoped credential.
	if _, err := f.store.Current(ctx, scoped); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Current(scoped credential) err = %v, want ErrSessionInvalid", err)
	}
	if _, _, err := f.store.Messages(ctx, scoped, storage.Page{Limit: 20}); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Messages(scoped credential) err = %v, want ErrSessionInvalid", err)
	}
	if _, _, err := f.store.Select(ctx, m.ID, sess); !errors.Is(err, storage.ErrCredentialInvalid) {
		t.Errorf("Select(session) err = %v, want ErrCredentialInvalid", err)
	}
	// A valid credential presented for another mailbox id selects nothing.
	if _, _, err := f.store.Select(ctx, uuid.New(), scoped); !errors.Is(err, storage.ErrCredentialInvalid) {
		t.Errorf("Select(other id) err = %v, want ErrCredentialInvalid", err)
	}
	// Nothing in Redis holds a secret: only digests.
	for _, k := range storagetest.Leftovers(t, f.prefix) {
		vals, _ := f.client.Do(ctx, f.client.B().Hgetall().Key(k).Build()).AsStrMap()
		for field, v := range vals {
			for _, secret := range []string{scoped.String(), sess.String()} {
				_, enc, _ := strings.Cut(secret, ".")
				if strings.Contains(field, enc) || strings.Contains(v, enc) {
					t.Errorf("key %s stores a raw secret", k)
				}
			}
		}
	}
}

func TestSessionsAreBounded(t *testing.T) {
	f := newFixture(t, storage.Config{MaxSessions: 2})
	ctx := ctxT(t)
	m, scoped, first := f.open(t, time.Minute)
	_, second, err := f.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatal(err)
	}
	_, third, err := f.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Current(ctx, first); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("oldest session: err = %v, want ErrSessionInvalid", err)
	}
	for _, s := range []storage.Credential{second, third} {
		if _, err := f.store.Current(ctx, s); err != nil {
			t.Errorf("newer session: %v", err)
		}
	}
}

func TestMessagesNewestFirstAndPaged(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	var sent []storage.Summary
	for _, s := range []string{"one", "two", "three", "four", "five"} {
		sent = append(sent, f.deliver(t, m.Address, s))
	}
	tests := []struct {
		page     storage.Page
		subjects []string
		more     bool
	}{
		{storage.Page{Limit: 20}, []string{"five", "four", "three", "two", "one"}, false},
		{storage.Page{Limit: 2}, []string{"five", "four"}, true},
		{storage.Page{Limit: 2, Offset: 2}, []string{"three", "two"}, true},
		{storage.Page{Limit: 2, Offset: 4}, []string{"one"}, false},
		{storage.Page{Limit: 5}, []string{"five", "four", "three", "two", "one"}, false},
		{storage.Page{Limit: 4, Offset: 1}, []string{"four", "three", "two", "one"}, false},
		{storage.Page{Limit: 10, Offset: 5}, nil, false},
		{storage.Page{Limit: 10, Offset: 1 << 30}, nil, false},
	}
	for _, tt := range tests {
		got, more, err := f.store.Messages(ctx, sess, tt.page)
		if err != nil {
			t.Fatalf("%+v: %v", tt.page, err)
		}
		var subjects []string
		for _, s := range got {
			subjects = append(subjects, s.Subject)
		}
		if strings.Join(subjects, ",") != strings.Join(tt.subjects, ",") || more != tt.more {
			t.Errorf("%+v = %v more=%v, want %v more=%v", tt.page, subjects, more, tt.subjects, tt.more)
		}
	}
	all, _, _ := f.store.Messages(ctx, sess, storage.Page{Limit: 1})
	if got, want := all[0], sent[4]; got != want {
		t.Errorf("listed summary = %+v, want what Deliver returned %+v", got, want)
	}
	msg, err := f.store.Message(ctx, sess, sent[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Summary != sent[1] || msg.Text != "text of two" || msg.HTML != "<p>two</p>" {
		t.Errorf("Message = %+v", msg)
	}
}

func TestMessageIsolationAndDelete(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	a, _, sessA := f.open(t, 10*time.Minute)
	_, _, sessB := f.open(t, 10*time.Minute)
	msg := f.deliver(t, a.Address, "for a")

	if _, err := f.store.Message(ctx, sessB, msg.ID); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("other mailbox's message: err = %v, want ErrMessageNotFound", err)
	}
	if err := f.store.DeleteMessage(ctx, sessB, msg.ID); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("delete other mailbox's message: err = %v, want ErrMessageNotFound", err)
	}
	if _, err := f.store.Message(ctx, sessA, uuid.New()); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("unknown message: err = %v, want ErrMessageNotFound", err)
	}
	if err := f.store.DeleteMessage(ctx, sessA, msg.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Message(ctx, sessA, msg.ID); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("deleted message: err = %v, want ErrMessageNotFound", err)
	}
	if err := f.store.DeleteMessage(ctx, sessA, msg.ID); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("deleting twice: err = %v, want ErrMessageNotFound", err)
	}
	list, _, _ := f.store.Messages(ctx, sessA, storage.Page{Limit: 10})
	if len(list) != 0 {
		t.Errorf("list after delete = %v, want empty", list)
	}
}

func TestDeliverAddressing(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{m.Address, true},
		{strings.ToUpper(m.Address), true},
		{m.Tag() + "@other.test", false},
		{storage.NewTag() + "@" + domain, false},
		{"not-a-tag@" + domain, false},
		{m.Tag(), false},
		{"", false},
	} {
		live, err := f.store.Exists(ctx, tt.addr)
		if err != nil || live != tt.ok {
			t.Errorf("Exists(%q) = %v, %v; want %v", tt.addr, live, err, tt.ok)
		}
		_, err = f.store.Deliver(ctx, tt.addr, storage.NewMessage{Subject: "x", Status: storage.StatusReady})
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, storage.ErrMailboxNotFound) {
			t.Errorf("Deliver(%q) err = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
	list, _, _ := f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if len(list) != 2 {
		t.Errorf("%d messages delivered, want 2", len(list))
	}
}

func TestBodiesOnlyWhenReady(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	for _, st := range []storage.Status{storage.StatusPending, storage.StatusFailed, "bogus"} {
		s, err := f.store.Deliver(ctx, m.Address, storage.NewMessage{Subject: string(st), Status: st, Text: "t", HTML: "h"})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := f.store.Message(ctx, sess, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Text != "" || msg.HTML != "" {
			t.Errorf("status %q: bodies %q %q, want empty", msg.Status, msg.Text, msg.HTML)
		}
		if !msg.Status.Valid() {
			t.Errorf("stored status %q is not a state of the API", msg.Status)
		}
	}
}

func TestCapsEvictOldest(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		f := newFixture(t, storage.Config{MaxMessages: 3})
		m, _, sess := f.open(t, 10*time.Minute)
		for _, s := range []string{"1", "2", "3", "4", "5"} {
			f.deliver(t, m.Address, s)
		}
		assertSubjects(t, f, sess, "5,4,3")
		assertBoxCounters(t, f, m, 3)
	})
	t.Run("bytes", func(t *testing.T) {
		f := newFixture(t, storage.Config{MaxMailboxBytes: 3000})
		m, _, sess := f.open(t, 10*time.Minute)
		big := strings.Repeat("x", 1000)
		for _, s := range []string{"1", "2", "3", "4"} {
			if _, err := f.store.Deliver(ctxT(t), m.Address, storage.NewMessage{Subject: s, Status: storage.StatusReady, Text: big}); err != nil {
				t.Fatal(err)
			}
		}
		assertSubjects(t, f, sess, "4,3")
		assertBoxCounters(t, f, m, 2)
	})
	t.Run("message size", func(t *testing.T) {
		f := newFixture(t, storage.Config{MaxMessageBytes: 100})
		m, _, sess := f.open(t, 10*time.Minute)
		s, err := f.store.Deliver(ctxT(t), m.Address, storage.NewMessage{
			Subject: "big", Status: storage.StatusReady, Text: strings.Repeat("é", 40), HTML: strings.Repeat("<b>x</b>", 50),
		})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := f.store.Message(ctxT(t), sess, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(msg.Subject) + len(msg.Text) + len(msg.HTML); n > 100 {
			t.Errorf("stored %d bytes, cap is 100", n)
		}
		if msg.Text != strings.Repeat("é", 40) {
			t.Errorf("text %q: the text fits and must be kept whole", msg.Text)
		}
		if !strings.HasPrefix(strings.Repeat("<b>x</b>", 50), msg.HTML) || msg.HTML == "" {
			t.Errorf("html %q is not a prefix of the original", msg.HTML)
		}
	})
}

func assertSubjects(t *testing.T, f fixture, sess storage.Credential, want string) {
	t.Helper()
	list, _, err := f.store.Messages(ctxT(t), sess, storage.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.Subject)
	}
	if strings.Join(got, ",") != want {
		t.Errorf("subjects = %v, want %s", got, want)
	}
}

// assertBoxCounters checks that the stream, the box's message fields and the
// counters agree after evictions: nothing is left half-deleted, and nothing
// is left in the bodies hash of the layout before 2026-11-25.
func assertBoxCounters(t *testing.T, f fixture, m storage.Mailbox, n int64) {
	t.Helper()
	ctx := ctxT(t)
	box, msgs, bodies := f.prefix+":{"+m.Tag()+"}:box", f.prefix+":{"+m.Tag()+"}:msgs", f.prefix+":{"+m.Tag()+"}:bodies"
	count, _ := f.client.Do(ctx, f.client.B().Hget().Key(box).Field("n").Build()).AsInt64()
	xlen, _ := f.client.Do(ctx, f.client.B().Xlen().Key(msgs).Build()).AsInt64()
	hlen, _ := f.client.Do(ctx, f.client.B().Hlen().Key(bodies).Build()).AsInt64()
	metas, jsons, _ := boxMessageFields(t, f, box)
	if count != n || xlen != n || metas != n || jsons != n || hlen != 0 {
		t.Errorf("counter n=%d, stream len %d, box message fields %d and %d, bodies fields %d; want %d, %d, %d, %d, 0",
			count, xlen, metas, jsons, hlen, n, n, n, n)
	}
}

// boxMessageFields counts the box's message fields: <id> (the id's 16
// bytes: stream id, size, key), <id>m (JSON) and d:<key>, by their lengths.
func boxMessageFields(t *testing.T, f fixture, box string) (metas, jsons, keys int64) {
	t.Helper()
	names, err := f.client.Do(ctxT(t), f.client.B().Hkeys().Key(box).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		switch {
		case len(name) == 18 && strings.HasPrefix(name, "d:"):
			keys++
		case len(name) == 16:
			metas++
		case len(name) == 17 && strings.HasSuffix(name, "m"):
			jsons++
		}
	}
	return metas, jsons, keys
}

func TestExtendMovesEveryKey(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 5*time.Minute)
	f.deliver(t, m.Address, "hello")

	got, owner, err := f.store.Extend(ctx, sess, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if owner != "owner-1" {
		t.Errorf("owner = %q", owner)
	}
	if want := m.ExpiresAt.Add(10 * time.Minute); !got.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, want)
	}
	ttls := f.pttls(t)
	if len(ttls) != 2 {
		t.Fatalf("keys = %v, want box and msgs", ttls)
	}
	for k, ms := range ttls {
		left := time.Until(got.ExpiresAt).Milliseconds()
		if ms <= 0 || ms > left+2000 || ms < left-2000 {
			t.Errorf("%s PTTL %d ms, want about %d ms (the new expiry)", k, ms, left)
		}
	}
	// Extensions stop at max_expires_at; at the cap the grant is zero.
	for range 6 {
		got, _, err = f.store.Extend(ctx, sess, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !got.ExpiresAt.Equal(m.MaxExpiresAt) {
		t.Errorf("ExpiresAt after many extensions = %v, want max %v", got.ExpiresAt, m.MaxExpiresAt)
	}
	cur, err := f.store.Current(ctx, sess)
	if err != nil || !cur.ExpiresAt.Equal(m.MaxExpiresAt) {
		t.Errorf("Current = %+v, %v", cur, err)
	}
}

func TestDestroyRemovesEveryKey(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, scoped, sess := f.open(t, 10*time.Minute)
	f.deliver(t, m.Address, "a")
	msg := f.deliver(t, m.Address, "b")
	if n := len(storagetest.Leftovers(t, f.prefix)); n != 2 {
		t.Fatalf("%d keys before destroy, want 2 (box and msgs)", n)
	}
	owner, err := f.store.Destroy(ctx, sess)
	if err != nil || owner != "owner-1" {
		t.Fatalf("Destroy = %q, %v", owner, err)
	}
	if left := storagetest.Leftovers(t, f.prefix); len(left) != 0 {
		t.Errorf("keys left after destroy: %v", left)
	}
	if _, err := f.store.Current(ctx, sess); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Current after destroy: %v", err)
	}
	if _, err := f.store.Message(ctx, sess, msg.ID); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Message after destroy: %v", err)
	}
	if _, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 20}); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Messages after destroy: %v", err)
	}
	if _, _, err := f.store.Select(ctx, m.ID, scoped); !errors.Is(err, storage.ErrMailboxNotFound) {
		t.Errorf("Select after destroy: %v, want ErrMailboxNotFound", err)
	}
	if _, err := f.store.Destroy(ctx, sess); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Destroy twice: %v", err)
	}
	if _, err := f.store.Deliver(ctx, m.Address, storage.NewMessage{Status: storage.StatusReady}); !errors.Is(err, storage.ErrMailboxNotFound) {
		t.Errorf("Deliver after destroy: %v", err)
	}
	if left := storagetest.Leftovers(t, f.prefix); len(left) != 0 {
		t.Errorf("a refused delivery left keys: %v", left)
	}
}

func TestExpiryRemovesEverything(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, scoped, sess := f.open(t, 700*time.Millisecond)
	f.deliver(t, m.Address, "soon gone")
	for _, ms := range f.pttls(t) {
		if ms <= 0 || ms > 700 {
			t.Errorf("PTTL %d ms, want within the 700 ms lifetime", ms)
		}
	}
	time.Sleep(time.Until(m.ExpiresAt) + 50*time.Millisecond)
	if _, err := f.store.Current(ctx, sess); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Current after expiry: %v", err)
	}
	if _, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 20}); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Messages after expiry: %v", err)
	}
	if _, _, err := f.store.Select(ctx, m.ID, scoped); !errors.Is(err, storage.ErrMailboxNotFound) {
		t.Errorf("Select after expiry: %v", err)
	}
	if live, _ := f.store.Exists(ctx, m.Address); live {
		t.Error("Exists after expiry = true")
	}
	if _, err := f.store.Deliver(ctx, m.Address, storage.NewMessage{Status: storage.StatusReady}); !errors.Is(err, storage.ErrMailboxNotFound) {
		t.Errorf("Deliver after expiry: %v", err)
	}
	if left := storagetest.Leftovers(t, f.prefix); len(left) != 0 {
		t.Errorf("keys left after expiry: %v", left)
	}
}

// subscribe subscribes to the events channel of the mailbox with tag until
// ctx ends and returns once the subscription is live. Probes it published
// to find that out may still arrive as "probe".
func subscribe(ctx context.Context, f fixture, tag string) <-chan string {
	got := make(chan string, 16)
	subscribed := make(chan struct{})
	go func() {
		_ = f.client.Receive(ctx, f.client.B().Ssubscribe().Channel(f.store.Channel(tag)).Build(), func(msg rueidis.PubSubMessage) {
			got <- msg.Message
		})
	}()
	// Wait until the subscription is live: publish probes until one arrives.
	go func() {
		for ctx.Err() == nil {
			f.client.Do(ctx, f.client.B().Spublish().Channel(f.store.Channel(tag)).Message("probe").Build())
			select {
			case <-subscribed:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for msg := range got {
		if msg == "probe" {
			close(subscribed)
			break
		}
	}
	return got
}

func TestEventsPublishedOnDeliverAndDestroy(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	got := subscribe(ctx, f, m.Tag())
	s := f.deliver(t, m.Address, "evented")
	if _, err := f.store.Destroy(ctx, sess); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(events) < 2 {
		select {
		case msg := <-got:
			if msg != "probe" {
				events = append(events, msg)
			}
		case <-ctx.Done():
			t.Fatalf("events so far %v: %v", events, ctx.Err())
		}
	}
	ev, err := storage.ParseEvent([]byte(events[0]))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != storage.EventMessage || ev.Message != s {
		t.Errorf("event = %+v, want message %+v", ev, s)
	}
	if ev, err := storage.ParseEvent([]byte(events[1])); err != nil || ev.Type != storage.EventDeleted {
		t.Errorf("event = %+v, %v, want deleted", ev, err)
	}
}

func TestUnavailable(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := f.store.Create(ctx, storage.NewTag(), domain, time.Minute, "o"); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Create with a dead context: %v, want ErrUnavailable", err)
	}
	if _, err := f.store.Deliver(ctx, storage.NewTag()+"@"+domain, storage.NewMessage{}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Deliver with a dead context: %v, want ErrUnavailable", err)
	}
}

package storage_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mayfly/mayfly/storage"
)

// TestWritesLayoutOfNovember24 drives a store that writes layout 2026-11-24
// (MAYFLY_STORAGE_WRITE_LAYOUT while nodes of that release still run) and
// checks what lands in Redis is what that release reads: the scoped digest
// and the session field as 64 hex digits, each message in the bodies hash
// with its JSON whole (id included), "<size> <hex key>" and d:<hex key> =
// id, and the bodies hash expiring with the mailbox. The store still reads
// it all, and a switch of layouts in the middle of a mailbox's life keeps
// dedupe, eviction and the byte count exact in both directions.
func TestWritesLayoutOfNovember24(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMessages: 3, WriteLayout: storage.Layout20261124})
	ctx := ctxT(t)
	if got := f.store.WriteLayout(); got != storage.Layout20261124 {
		t.Fatalf("WriteLayout() = %q", got)
	}
	m, scoped, sess := f.open(t, 10*time.Minute)
	pfx := f.prefix + ":{" + m.Tag() + "}:"
	b := f.client.B()
	box, err := f.client.Do(ctx, b.Hgetall().Key(pfx+"box").Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	_, scopedHex := digestsOf(t, scoped)
	_, sessHex := digestsOf(t, sess)
	if box["k"] != scopedHex {
		t.Errorf("box k = %q, want the scoped digest as 64 hex digits %q", box["k"], scopedHex)
	}
	if box["s:"+sessHex] == "" {
		t.Errorf("box has no field s:<64 hex digits> for the session: %q", keysOf(box))
	}

	first := f.deliverKeyed(t, m.Address, "first")
	bodies, err := f.client.Do(ctx, b.Hgetall().Key(pfx+"bodies").Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	id := first.ID.String()
	key := keyedMessage("first").Key
	if bodies[id] != first.StreamID || !strings.HasPrefix(bodies[id+":m"], `{"id":"`+id+`",`) ||
		!strings.HasSuffix(bodies[id+":k"], " "+key) || bodies["d:"+key] != id {
		t.Errorf("bodies hash = %q, want <id> = stream id, <id>:m = the JSON with its id, <id>:k = <size> <hex key>, d:<hex key> = id", bodies)
	}
	for f := range box {
		if len(f) == 16 {
			t.Errorf("box has a message field of the newer layout: %q", f)
		}
	}
	if ttl, _ := f.client.Do(ctx, b.Pttl().Key(pfx+"bodies").Build()).AsInt64(); ttl <= 0 {
		t.Errorf("bodies PTTL = %d, want the mailbox's expiry", ttl)
	}
	msg, err := f.store.Message(ctx, sess, first.ID)
	if err != nil || msg.Subject != "first" || msg.ID != first.ID {
		t.Fatalf("Message written in layout 2026-11-24: %+v, %v", msg, err)
	}

	// A retry after the fleet moved on is still the same message, and so is
	// one of a message the newer layout stored, after a move back.
	if err := f.store.SetWriteLayout(storage.Layout20261125); err != nil {
		t.Fatal(err)
	}
	if dup := f.deliverKeyed(t, m.Address, "first"); !dup.Duplicate || dup.ID != first.ID {
		t.Errorf("retry in layout 2026-11-25 of a message stored in 2026-11-24: %+v", dup)
	}
	second := f.deliverKeyed(t, m.Address, "second")
	if err := f.store.SetWriteLayout(storage.Layout20261124); err != nil {
		t.Fatal(err)
	}
	if dup := f.deliverKeyed(t, m.Address, "second"); !dup.Duplicate || dup.ID != second.ID {
		t.Errorf("retry in layout 2026-11-24 of a message stored in 2026-11-25: %+v", dup)
	}
	// Two more: the cap of 3 evicts "first" (bodies) and keeps the count.
	f.deliverKeyed(t, m.Address, "third")
	f.deliverKeyed(t, m.Address, "fourth")
	assertSubjects(t, f, sess, "fourth,third,second")
	assertCounts(t, f, m, 3)
	if _, err := f.store.Message(ctx, sess, first.ID); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("evicted message: %v", err)
	}
	if err := f.store.DeleteMessage(ctx, sess, second.ID); err != nil {
		t.Fatalf("DeleteMessage of a message of the newer layout: %v", err)
	}
	assertCounts(t, f, m, 2)
	if err := f.store.SetWriteLayout("2026-12-01"); err == nil {
		t.Error("SetWriteLayout of an unknown layout: no error")
	}
}

// deliverKeyed delivers keyedMessage(subject).
func (f fixture) deliverKeyed(t *testing.T, addr, subject string) storage.Summary {
	t.Helper()
	s, err := f.store.Deliver(ctxT(t), addr, keyedMessage(subject))
	if err != nil {
		t.Fatalf("Deliver %q: %v", subject, err)
	}
	return s
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMixedFleetRepairs: what a fleet that mixed releases without the
// write-layout setting left behind is repaired by the next delivery: a
// bodies hash without a TTL (a node of 2026-11-24 sets it only when its own
// count says the mailbox is empty, and the newer layout's messages are not
// in that hash) gets the mailbox's expiry, and a byte count left too high
// (that node evicted the newer layout's messages as 0 bytes) is read again
// from the messages before it evicts anything.
func TestMixedFleetRepairs(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMailboxBytes: 4096})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	pfx := f.prefix + ":{" + m.Tag() + "}:"
	b := f.client.B()
	f.deliver(t, m.Address, "one")
	// What the old node left: a bodies field without a TTL, and 5,000
	// bytes counted for messages it evicted.
	for _, c := range []interface{ Error() error }{
		f.client.Do(ctx, b.Hset().Key(pfx+"bodies").FieldValue().FieldValue("leftover", "1").Build()),
		f.client.Do(ctx, b.Hincrby().Key(pfx+"box").Field("b").Increment(5000).Build()),
	} {
		if err := c.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, _ := f.client.Do(ctx, b.Pttl().Key(pfx+"bodies").Build()).AsInt64(); ttl != -1 {
		t.Fatalf("set-up: bodies PTTL = %d, want -1", ttl)
	}
	f.deliver(t, m.Address, "two")
	if ttl, _ := f.client.Do(ctx, b.Pttl().Key(pfx+"bodies").Build()).AsInt64(); ttl <= 0 {
		t.Errorf("bodies PTTL after a delivery = %d, want the mailbox's expiry", ttl)
	}
	// "one" stays: the 5,000 bytes that no message holds are not counted.
	assertSubjects(t, f, sess, "two,one")
	assertCounts(t, f, m, 2)
}

// assertCounts checks the box's counters against what it holds, in either
// layout: n is the stream's length and want, b the sum of the sizes stored
// with the messages (box field <id> or bodies field <id>:k).
func assertCounts(t *testing.T, f fixture, m storage.Mailbox, want int64) {
	t.Helper()
	ctx := ctxT(t)
	pfx := f.prefix + ":{" + m.Tag() + "}:"
	b := f.client.B()
	box, err := f.client.Do(ctx, b.Hgetall().Key(pfx+"box").Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	bodies, _ := f.client.Do(ctx, b.Hgetall().Key(pfx+"bodies").Build()).AsStrMap()
	entries, err := f.client.Do(ctx, b.Xrange().Key(pfx+"msgs").Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, e := range entries {
		var s storage.Summary
		id, _, _ := strings.Cut(strings.TrimPrefix(e.FieldValues["j"], `{"id":"`), `"`)
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("entry %v: %v (%+v)", e, err, s)
		}
		meta, ok := box[string(u[:])]
		if !ok {
			meta = "- " + bodies[id+":k"]
		}
		fields := strings.Fields(meta)
		if len(fields) < 2 {
			t.Fatalf("message %s: no stored size (%q)", id, meta)
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		size += n
	}
	n, _ := strconv.ParseInt(box["n"], 10, 64)
	bytes, _ := strconv.ParseInt(box["b"], 10, 64)
	if n != want || int64(len(entries)) != want || bytes != size {
		t.Errorf("counters n=%d b=%d; the mailbox holds %d messages of %d bytes; want %d messages", n, bytes, len(entries), size, want)
	}
}

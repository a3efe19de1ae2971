package storage_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/mayfly/mayfly/storage"
)

// digestsOf returns the digest of credential c as the box stores it (16
// bytes, raw) and as the layout before 2026-11-25 stored it (64 hex digits).
func digestsOf(t *testing.T, c storage.Credential) (cur, old string) {
	t.Helper()
	_, enc, _ := strings.Cut(c.String(), ".")
	secret, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(secret)
	return string(sum[:16]), hex.EncodeToString(sum[:])
}

// TestReadsLayoutOfNovember24 drives a mailbox stored in the layout before
// 2026-11-25, as a rolling upgrade finds it: the scoped digest k and the
// session field s:<digest> as 64 hex digits, and each message in the bodies
// hash (<id> = stream id, <id>:m = its JSON with the id, <id>:k = "<size>
// <64-hex key>", d:<64-hex key> = id). Its session still authenticates, its
// scoped credential still selects, its messages are read, replayed,
// deduplicated, evicted and deleted, and its oldest session is revoked.
func TestReadsLayoutOfNovember24(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMessages: 3, MaxSessions: 2})
	ctx := ctxT(t)
	m, scoped, sess := f.open(t, 10*time.Minute)
	pfx := f.prefix + ":{" + m.Tag() + "}:"
	b := f.client.B()
	do := func(cmds ...rueidis.Completed) {
		t.Helper()
		for _, c := range cmds {
			if err := f.client.Do(ctx, c).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, scopedHex := digestsOf(t, scoped)
	sessCur, sessHex := digestsOf(t, sess)
	do(b.Hset().Key(pfx+"box").FieldValue().FieldValue("k", scopedHex).FieldValue("s:"+sessHex, "1").Build(),
		b.Hdel().Key(pfx+"box").Field("s:"+sessCur).Build())

	old := func(subject string) (uuid.UUID, string) {
		t.Helper()
		id := uuid.New()
		key := storage.DeliveryKey([]byte("Subject: " + subject + "\r\n\r\nbody\r\n"))
		head := fmt.Sprintf(`{"id":%q,"from":"old@example.com","subject":%q,"status":"ready"`, id.String(), subject)
		sid, err := f.client.Do(ctx, b.Xadd().Key(pfx+"msgs").Id("*").FieldValue().FieldValue("j", head+"}").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		js := head + fmt.Sprintf(`,"text_body":"text of %s","html_body":"<p>%s</p>"}`, subject, subject)
		do(b.Hset().Key(pfx+"bodies").FieldValue().FieldValue(id.String(), sid).FieldValue(id.String()+":m", js).
			FieldValue(id.String()+":k", "30 "+key).FieldValue("d:"+key, id.String()).Build(),
			b.Pexpire().Key(pfx+"bodies").Milliseconds(time.Until(m.ExpiresAt).Milliseconds()).Build(),
			b.Hincrby().Key(pfx+"box").Field("n").Increment(1).Build(),
			b.Hincrby().Key(pfx+"box").Field("b").Increment(30).Build())
		return id, sid
	}
	first, firstSID := old("old one")
	second, _ := old("old two")

	if _, err := f.store.Current(ctx, sess); err != nil {
		t.Fatalf("Current with a session stored as hex: %v", err)
	}
	sums, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if err != nil || len(sums) != 2 || sums[0].ID != second || sums[1].Subject != "old one" {
		t.Fatalf("Messages with a session stored as hex: %+v, %v", sums, err)
	}
	msg, err := f.store.Message(ctx, sess, first)
	if err != nil || msg.Text != "text of old one" || msg.HTML != "<p>old one</p>" || msg.StreamID != firstSID {
		t.Fatalf("Message stored in the bodies hash: %+v, %v", msg, err)
	}
	st, err := f.store.OpenStream(ctx, sess, "token", first, 10)
	if err != nil || len(st.Replay) != 1 || st.Replay[0].ID != second {
		t.Fatalf("OpenStream after a message stored in the bodies hash: %+v, %v", st, err)
	}

	// The scoped credential stored as hex still selects.
	_, sess2, err := f.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatalf("Select with k stored as hex: %v", err)
	}
	// A retry of the first message (its key stored as hex in the bodies
	// hash) is a duplicate of it.
	dup, err := f.store.Deliver(ctx, m.Address, keyedMessage("old one"))
	if err != nil || !dup.Duplicate || dup.ID != first || dup.StreamID != firstSID {
		t.Fatalf("retry of a message stored in the bodies hash: %+v, %v", dup, err)
	}
	// Two new ones: the cap of 3 evicts the first, with its delivery key.
	f.deliver(t, m.Address, "new one")
	f.deliver(t, m.Address, "new two")
	assertSubjects(t, f, sess2, "new two,new one,old two")
	if _, err := f.store.Message(ctx, sess2, first); !errors.Is(err, storage.ErrMessageNotFound) {
		t.Errorf("evicted message: %v", err)
	}
	if err := f.store.DeleteMessage(ctx, sess2, second); err != nil {
		t.Fatalf("DeleteMessage of a message stored in the bodies hash: %v", err)
	}
	assertSubjects(t, f, sess2, "new two,new one")
	assertBoxCounters(t, f, m, 2)
	if again, err := f.store.Deliver(ctx, m.Address, keyedMessage("old one")); err != nil || again.Duplicate {
		t.Fatalf("the evicted message's key: %+v, %v; want a new copy", again, err)
	}
	newSize := 2*(len("Sender <s@example.org>")+len("new one")+len("text of new one")+len("<p>new one</p>")) +
		len("s@example.org") + len("old one") + len("body")
	if n, _ := f.client.Do(ctx, b.Hget().Key(pfx+"box").Field("b").Build()).AsInt64(); n != int64(newSize) {
		t.Errorf("stored bytes = %d after dropping both old messages, want %d", n, newSize)
	}

	// A third session revokes the oldest, the one stored as hex, and says so
	// in a form that ends its event streams.
	events := subscribe(ctx, f, m.Tag())
	if _, _, err := f.store.Select(ctx, m.ID, scoped); err != nil {
		t.Fatal(err)
	}
	for revoked := false; !revoked; {
		select {
		case msg := <-events:
			ev, err := storage.ParseEvent([]byte(msg))
			if msg == "probe" || err != nil || ev.Type != storage.EventRevoked {
				continue
			}
			if !ev.Revokes(sess) || ev.Revokes(sess2) {
				t.Errorf("revoked event %s: revokes the hex session %v, the second %v; want true, false", msg, ev.Revokes(sess), ev.Revokes(sess2))
			}
			revoked = true
		case <-ctx.Done():
			t.Fatal("no revoked event")
		}
	}
	if _, err := f.store.Current(ctx, sess); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("Current with the revoked hex session: %v", err)
	}
	if _, err := f.store.Current(ctx, sess2); err != nil {
		t.Errorf("Current with the second session: %v", err)
	}
	if _, err := f.store.Destroy(ctx, sess2); err != nil {
		t.Fatal(err)
	}
}

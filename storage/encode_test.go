package storage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/storage"
	"github.com/redis/rueidis"
)

// trickyMessages are what the pre-encoding must carry through unchanged:
// HTML, quotes, backslashes, non-ASCII, invalid UTF-8 and control bytes.
var trickyMessages = []storage.NewMessage{
	{From: `"Zoë" <z@example.com>`, Subject: `<b>"bold" & \back</b>`, Status: storage.StatusReady,
		Text: "line 1\nline 2\t\u2028 \\ \"", HTML: `<p class="x">a &amp; b</p><script>x</script>`},
	{From: "bad \xff utf-8", Subject: "nul \x00 esc \x1b", Status: storage.StatusReady, Text: "\xc3\x28", HTML: ""},
	{From: "f@example.com", Subject: "failed", Status: storage.StatusFailed, Text: "hidden", HTML: "<p>hidden</p>"},
	{From: "", Subject: "", Status: storage.StatusReady, Text: "", HTML: ""},
}

// TestEncodedMatchesDecoded delivers awkward messages and reads them both
// ways: the pre-encoded JSON must decode to exactly what the decoded reads
// return, which must be what was delivered (as the edge showed it before:
// bodies only when ready, invalid UTF-8 as U+FFFD).
func TestEncodedMatchesDecoded(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	var ids []uuid.UUID
	for _, nm := range trickyMessages {
		s, err := f.store.Deliver(ctx, m.Address, nm)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	page, _, err := f.store.MessagesJSON(ctx, sess, storage.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	sums, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != len(trickyMessages) || len(sums) != len(page) {
		t.Fatalf("%d encoded, %d decoded; want %d", len(page), len(sums), len(trickyMessages))
	}
	for i, e := range page {
		want := trickyMessages[len(trickyMessages)-1-i] // newest first
		var got map[string]string
		if err := json.Unmarshal([]byte(e.JSON), &got); err != nil {
			t.Fatalf("entry %d: %q: %v", i, e.JSON, err)
		}
		if got["id"] != sums[i].ID.String() || got["from"] != sums[i].From || got["subject"] != sums[i].Subject ||
			got["status"] != string(sums[i].Status) || got["to"] != sums[i].To || got["to"] != m.Address || len(got) != 5 {
			t.Errorf("entry %d: encoded %v, decoded %+v", i, got, sums[i])
		}
		if got["from"] != strings.ToValidUTF8(want.From, "\ufffd") || got["subject"] != strings.ToValidUTF8(want.Subject, "\ufffd") {
			t.Errorf("entry %d: from %q subject %q, want %q %q", i, got["from"], got["subject"], want.From, want.Subject)
		}
		if !e.ReceivedAt.Equal(sums[i].ReceivedAt) || e.StreamID != sums[i].StreamID {
			t.Errorf("entry %d: %v %s, decoded %v %s", i, e.ReceivedAt, e.StreamID, sums[i].ReceivedAt, sums[i].StreamID)
		}
	}
	for i, id := range ids {
		e, err := f.store.MessageJSON(ctx, sess, id)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(e.JSON), &got); err != nil {
			t.Fatalf("message %d: %q: %v", i, e.JSON, err)
		}
		want := trickyMessages[i]
		text, html := strings.ToValidUTF8(want.Text, "\ufffd"), strings.ToValidUTF8(want.HTML, "\ufffd")
		if want.Status != storage.StatusReady {
			text, html = "", ""
		}
		if got["text_body"] != text || got["html_body"] != html || got["id"] != id.String() || got["to"] != m.Address || len(got) != 7 {
			t.Errorf("message %d: %v, want bodies %q %q", i, got, text, html)
		}
		msg, err := f.store.Message(ctx, sess, id)
		if err != nil || msg.Text != got["text_body"] || msg.HTML != got["html_body"] || msg.Subject != got["subject"] || msg.To != got["to"] || msg.StreamID != e.StreamID {
			t.Errorf("message %d decoded: %+v, %v; encoded %v", i, msg, err, got)
		}
	}
}

// TestReadsLayoutBefore reads, evicts and deletes messages stored in the
// layout before pre-encoding (stream fields i, f, s, t, z, d; bodies <id>:t
// and <id>:h), as a rolling upgrade finds them in live mailboxes.
func TestReadsLayoutBefore(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMessages: 2})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	pfx := f.prefix + ":{" + m.Tag() + "}:"
	b := f.client.B()
	old := func(subject, key string) uuid.UUID {
		t.Helper()
		id := uuid.New()
		fields := b.Xadd().Key(pfx+"msgs").Id("*").FieldValue().
			FieldValue("i", id.String()).FieldValue("f", "old@example.com").FieldValue("s", subject).
			FieldValue("t", "ready").FieldValue("z", "30")
		if key != "" {
			fields = fields.FieldValue("d", key)
		}
		sid, err := f.client.Do(ctx, fields.Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		hset := b.Hset().Key(pfx+"bodies").FieldValue().FieldValue(id.String(), sid).
			FieldValue(id.String()+":t", "text of "+subject).FieldValue(id.String()+":h", "<p>"+subject+"</p>")
		if key != "" {
			hset = hset.FieldValue("d:"+key, id.String())
		}
		for _, c := range []rueidis.Completed{hset.Build(),
			b.Hincrby().Key(pfx + "box").Field("n").Increment(1).Build(),
			b.Hincrby().Key(pfx + "box").Field("b").Increment(30).Build()} {
			if err := f.client.Do(ctx, c).Error(); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	first := old("old one", "k1")
	second := old("old two", "")

	sums, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if err != nil || len(sums) != 2 || sums[0].Subject != "old two" || sums[1].ID != first || sums[1].From != "old@example.com" {
		t.Fatalf("Messages over the old layout: %+v, %v", sums, err)
	}
	for _, sum := range sums {
		if sum.To != m.Address {
			t.Errorf("Messages over the old layout: To = %q, want the inbox's %q", sum.To, m.Address)
		}
	}
	msg, err := f.store.Message(ctx, sess, first)
	if err != nil || msg.Text != "text of old one" || msg.HTML != "<p>old one</p>" || msg.Subject != "old one" || msg.To != m.Address {
		t.Fatalf("Message of the old layout: %+v, %v", msg, err)
	}
	e, err := f.store.MessageJSON(ctx, sess, second)
	if err != nil || !strings.Contains(e.JSON, `"html_body":"<p>old two</p>"`) {
		t.Fatalf("MessageJSON of the old layout: %+v, %v", e, err)
	}
	// A new delivery over the cap of 2 evicts the oldest old-layout entry,
	// delivery key included; deleting the other leaves only the new one.
	f.deliver(t, m.Address, "new")
	if err := f.store.DeleteMessage(ctx, sess, second); err != nil {
		t.Fatal(err)
	}
	assertSubjects(t, f, sess, "new")
	newSize := len("Sender <s@example.org>") + len("new") + len("text of new") + len("<p>new</p>")
	assertBoxCounters(t, f, m, 1)
	if n, _ := f.client.Do(ctx, b.Hget().Key(pfx+"box").Field("b").Build()).AsInt64(); n != int64(newSize) {
		t.Errorf("stored bytes = %d after dropping both old messages, want %d", n, newSize)
	}
}

package storage_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/storage"
)

// TestParseRecipient: the tag is what follows the first '+', 1-64 of
// A-Z a-z 0-9 . _ -, in a local part of at most 64 octets; everything is
// lower-cased (ASCII only).
func TestParseRecipient(t *testing.T) {
	t.Parallel()
	base := "abcdefghij0123456789" // a tag of storage.TagLen
	for _, tt := range []struct {
		in      string
		box, to string
		err     error
	}{
		{base + "@d.test", base + "@d.test", base + "@d.test", nil},
		{base + "+signup-42@d.test", base + "@d.test", base + "+signup-42@d.test", nil},
		{"ABCDEFGHIJ0123456789+Sign.Up_X@D.Test", base + "@d.test", base + "+sign.up_x@d.test", nil},
		{base + "+" + strings.Repeat("a", 64-len(base)-1) + "@d.test", base + "@d.test", base + "+" + strings.Repeat("a", 64-len(base)-1) + "@d.test", nil},
		{base + "+@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+a+b@d.test", "", "", storage.ErrBadSubaddress},
		{base + "++@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+a b@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+a/b@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+a%b@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+\u212a@d.test", "", "", storage.ErrBadSubaddress}, // KELVIN SIGN: not an ASCII letter
		{base + "+é@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+" + strings.Repeat("a", 65) + "@d.test", "", "", storage.ErrBadSubaddress},
		{base + "+" + strings.Repeat("a", 64-len(base)) + "@d.test", "", "", storage.ErrLocalPartTooLong},
		{base + "+" + strings.Repeat("a", 64) + "@d.test", "", "", storage.ErrLocalPartTooLong},
	} {
		r, err := storage.ParseRecipient(tt.in)
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("ParseRecipient(%q) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if r.Box != tt.box || r.To != tt.to || r.Tagged() != (tt.box != tt.to) {
			t.Errorf("ParseRecipient(%q) = %+v (tagged %v), want box %q to %q", tt.in, r, r.Tagged(), tt.box, tt.to)
		}
	}
}

// TestDeliverSubaddress: mail to local+tag@domain is stored in the inbox
// local@domain with To naming the address as accepted (lower-cased); the
// inbox address's own mail has To = the inbox's address. The same bytes to
// the inbox and to a sub-address are two messages; a retry to either is a
// duplicate of its own. A sub-address counts against the inbox's caps.
func TestDeliverSubaddress(t *testing.T) {
	f := newFixture(t, storage.Config{MaxMessages: 3})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	tagged := m.Tag() + "+signup-42@" + domain
	upper := strings.ToUpper(m.Tag()) + "+SignUp-42@" + strings.ToUpper(domain)

	for _, addr := range []string{tagged, upper} {
		if ok, err := f.store.Exists(ctx, addr); err != nil || !ok {
			t.Errorf("Exists(%q) = %v, %v; want true", addr, ok, err)
		}
	}
	for _, tt := range []struct {
		addr string
		err  error
	}{
		{storage.NewTag() + "+signup@" + domain, nil}, // no such inbox: as the base address
		{m.Tag() + "+@" + domain, storage.ErrBadSubaddress},
		{m.Tag() + "+a+b@" + domain, storage.ErrBadSubaddress},
		{m.Tag() + "+a!b@" + domain, storage.ErrBadSubaddress},
		{m.Tag() + "+" + strings.Repeat("x", 44) + "@" + domain, storage.ErrLocalPartTooLong},
		{m.Tag() + "+signup@other.test", nil},
	} {
		ok, err := f.store.Exists(ctx, tt.addr)
		if ok || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("Exists(%q) = %v, %v; want false, %v", tt.addr, ok, err, tt.err)
		}
		if _, err := f.store.Deliver(ctx, tt.addr, storage.NewMessage{Subject: "x", Status: storage.StatusReady}); !errors.Is(err, storage.ErrMailboxNotFound) {
			t.Errorf("Deliver(%q) = %v, want ErrMailboxNotFound", tt.addr, err)
		}
	}

	raw := []byte("Subject: code\r\n\r\n123456\r\n")
	msg := storage.NewMessage{From: "s@example.org", Subject: "code", Status: storage.StatusReady, Text: "123456", Key: storage.DeliveryKey(raw)}
	toBox, err := f.store.Deliver(ctx, m.Address, msg)
	if err != nil || toBox.Duplicate || toBox.To != m.Address {
		t.Fatalf("Deliver to the inbox: %+v, %v", toBox, err)
	}
	toTag, err := f.store.Deliver(ctx, upper, msg)
	if err != nil || toTag.Duplicate || toTag.To != tagged {
		t.Fatalf("Deliver to the sub-address: %+v, %v; want a new message to %q", toTag, err, tagged)
	}
	for _, tt := range []struct {
		addr string
		want storage.Summary
	}{{tagged, toTag}, {m.Address, toBox}} {
		again, err := f.store.Deliver(ctx, tt.addr, msg)
		if err != nil || !again.Duplicate || again.ID != tt.want.ID || again.To != tt.want.To {
			t.Errorf("retry to %s: %+v, %v; want a duplicate of %s", tt.addr, again, err, tt.want.ID)
		}
	}

	sums, _, err := f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if err != nil || len(sums) != 2 {
		t.Fatalf("Messages: %+v, %v; want 2", sums, err)
	}
	if got, want := sums[0].To+" "+sums[1].To, tagged+" "+m.Address; got != want {
		t.Errorf("To, newest first = %q, want %q", got, want)
	}
	page, _, err := f.store.MessagesJSON(ctx, sess, storage.Page{Limit: 10})
	if err != nil || len(page) != 2 {
		t.Fatalf("MessagesJSON: %v, %v", page, err)
	}
	for i, want := range []string{tagged, m.Address} {
		if got := jsonMember(t, page[i].JSON, "to"); got != want {
			t.Errorf("list item %d: to = %q, want %q", i, got, want)
		}
	}
	e, err := f.store.MessageJSON(ctx, sess, toTag.ID)
	if err != nil || jsonMember(t, e.JSON, "to") != tagged || jsonMember(t, e.JSON, "text_body") != "123456" {
		t.Errorf("MessageJSON of the tagged message: %+v, %v", e, err)
	}

	// Caps: two more to other tags and the oldest goes (MaxMessages 3).
	f.deliver(t, m.Tag()+"+a@"+domain, "a")
	f.deliver(t, m.Tag()+"+b@"+domain, "b")
	assertSubjects(t, f, sess, "b,a,code")
	assertBoxCounters(t, f, m, 3)
	sums, _, _ = f.store.Messages(ctx, sess, storage.Page{Limit: 10})
	if len(sums) != 3 || sums[2].ID != toTag.ID {
		t.Errorf("after two more: %+v; want the inbox's own message evicted first", sums)
	}
}

// TestSubaddressNeedsLayout: a store writing a layout before 2026-11-27
// answers a sub-address, well-formed or not, as an unknown address, as the
// releases before it do, and stores nothing for it; a message it stores
// reads with To = the inbox's address on a store of the new layout.
func TestSubaddressNeedsLayout(t *testing.T) {
	f := newFixture(t, storage.Config{})
	ctx := ctxT(t)
	m, _, sess := f.open(t, 10*time.Minute)
	for _, layout := range []string{storage.Layout20261124, storage.Layout20261125, storage.Layout20261126} {
		old := storage.New(f.client, storage.Config{KeyPrefix: f.prefix, WriteLayout: layout})
		if old.Subaddressing() {
			t.Errorf("%s: Subaddressing() = true", layout)
		}
		for _, addr := range []string{m.Tag() + "+signup@" + domain, m.Tag() + "+@" + domain, m.Tag() + "+" + strings.Repeat("x", 60) + "@" + domain} {
			if ok, err := old.Exists(ctx, addr); ok || err != nil {
				t.Errorf("%s: Exists(%q) = %v, %v; want false, nil", layout, addr, ok, err)
			}
			if _, err := old.Deliver(ctx, addr, storage.NewMessage{Subject: "x", Status: storage.StatusReady}); !errors.Is(err, storage.ErrMailboxNotFound) {
				t.Errorf("%s: Deliver(%q) = %v, want ErrMailboxNotFound", layout, addr, err)
			}
		}
		sum, err := old.Deliver(ctx, m.Address, storage.NewMessage{From: "s@example.org", Subject: layout, Status: storage.StatusReady, Text: "t"})
		if err != nil {
			t.Fatalf("%s: Deliver to the inbox: %v", layout, err)
		}
		// Read by the new layout's store: "to" is the inbox's address.
		e, err := f.store.MessageJSON(ctx, sess, sum.ID)
		if err != nil || jsonMember(t, e.JSON, "to") != m.Address || jsonMember(t, e.JSON, "subject") != layout {
			t.Errorf("%s: MessageJSON = %+v, %v; want to %q", layout, e, err, m.Address)
		}
		if !strings.HasPrefix(e.JSON, `{"id":"`+sum.ID.String()+`","to":`) {
			t.Errorf("%s: MessageJSON = %s; want to second, as the new layout stores it", layout, e.JSON)
		}
	}
	if !f.store.Subaddressing() {
		t.Errorf("Subaddressing() = false on a store of %s", f.store.WriteLayout())
	}
	page, _, err := f.store.MessagesJSON(ctx, sess, storage.Page{Limit: 10})
	if err != nil || len(page) != 3 {
		t.Fatalf("MessagesJSON: %v, %v", page, err)
	}
	for i, e := range page {
		if got := jsonMember(t, e.JSON, "to"); got != m.Address {
			t.Errorf("item %d: to = %q, want %q", i, got, m.Address)
		}
	}
	st, err := f.store.OpenStream(ctx, sess, "token-1", idOf(t, page[2].JSON), 10)
	if err != nil || len(st.Replay) != 2 {
		t.Fatalf("OpenStream: %+v, %v", st, err)
	}
	for _, s := range st.Replay {
		if s.To != m.Address {
			t.Errorf("replayed %s: To = %q, want %q", s.Subject, s.To, m.Address)
		}
	}
}

// jsonMember is member name of JSON object js, as a string.
func jsonMember(t *testing.T, js, name string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	s, _ := v[name].(string)
	return s
}

// idOf reads the id of a stored JSON.
func idOf(t *testing.T, js string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(jsonMember(t, js, "id"))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

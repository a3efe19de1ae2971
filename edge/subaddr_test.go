package edge_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// TestMessageTo: every message summary (GET /messages, the event stream)
// and message (GET /messages/{id}) carries "to", the address it arrived
// for: a sub-address of the inbox or the inbox's own; a message stored by
// a node writing an older layout (no "to" stored) shows the inbox's
// address, in the list, the message, a live event and a replay. Every
// response is checked against openapi.yaml by the harness (additional
// properties refused).
func TestMessageTo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	m := u.open()
	addr := m["address"].(string)
	tagged := storage.TagOf(addr) + "+signup-42@" + addr[len(storage.TagOf(addr))+1:]
	old := storage.New(e.client, storage.Config{KeyPrefix: e.prefix, WriteLayout: storage.Layout20261126})

	s, _ := u.openStream()
	<-s.events // retry
	first := e.deliver(tagged, "tagged")
	assertMessageEvent(t, s.next(t, 5*time.Second), first)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	second, err := old.Deliver(ctx, addr, storage.NewMessage{From: "o@example.org", Subject: "old layout", Status: storage.StatusReady, Text: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ev := s.next(t, 5*time.Second)
	if got := jsonField(t, ev.data, "to"); got != addr || ev.id != second.ID.String() {
		t.Errorf("event of the old layout's message: id %s to %q, want %s to %q", ev.id, got, second.ID, addr)
	}
	s.check(t)

	r := u.do("GET", "/messages", "")
	u.want(r, 200, "")
	items, _ := r.body["data"].(map[string]any)["items"].([]any)
	wantTo := map[string]string{first.ID.String(): tagged, second.ID.String(): addr}
	if len(items) != 2 {
		t.Fatalf("list: %s", r.raw)
	}
	for _, it := range items {
		item := it.(map[string]any)
		if id := item["id"].(string); item["to"] != wantTo[id] {
			t.Errorf("list item %s: to = %v, want %q", id, item["to"], wantTo[id])
		}
	}
	for id, want := range wantTo {
		r := u.do("GET", "/messages/"+id, "")
		u.want(r, 200, "")
		if got := r.data("message")["to"]; got != want {
			t.Errorf("GET /messages/%s: to = %v, want %q", id, got, want)
		}
	}

	// A replay after the first message gives the second with its "to".
	s2, _ := u.openStream("Last-Event-ID", first.ID.String())
	<-s2.events // retry
	if ev := s2.next(t, 5*time.Second); ev.id != second.ID.String() || jsonField(t, ev.data, "to") != addr {
		t.Errorf("replayed %+v, want %s to %q", ev, second.ID, addr)
	}
	s2.check(t)
}

func jsonField(t *testing.T, data, name string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	s, _ := v[name].(string)
	return s
}

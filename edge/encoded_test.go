package edge_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mayfly/mayfly/storage"
)

// TestEncodedResponses checks the copy-through responses of GET /messages
// and GET /messages/{id} (pre-encoded at delivery) against what encoding the
// decoded messages gives, the way these handlers wrote them before: the same
// JSON values, field for field, for awkward content.
func TestEncodedResponses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser(randomIP())
	m := u.open()
	addr := m["address"].(string)
	msgs := []storage.NewMessage{
		{From: `"Zoë" <z@example.com>`, Subject: `<b>"bold" & \back</b> ` + "\u2028", Status: storage.StatusReady,
			Text: "line 1\nline 2\t\\ \"", HTML: `<p class="x">a &amp; b</p>`},
		{From: "bad \xff utf-8", Subject: "esc \x1b", Status: storage.StatusReady, Text: "\xc3\x28", HTML: "<i>x</i>"},
		{From: "f@example.com", Subject: "failed", Status: storage.StatusFailed, Text: "hidden", HTML: "<p>hidden</p>"},
	}
	for _, nm := range msgs {
		if _, err := e.store.Deliver(context.Background(), addr, nm); err != nil {
			t.Fatal(err)
		}
	}
	var sess storage.Credential
	for _, c := range u.hc.Jar.Cookies(mustURL(e.base)) {
		if c.Name == "service_session" {
			sess, _ = storage.ParseCredential(c.Value)
		}
	}
	if sess.Tag == "" {
		t.Fatal("no session cookie in the jar")
	}
	sums, more, err := e.store.Messages(context.Background(), sess, storage.Page{Limit: 2, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]map[string]any, len(sums))
	for i, s := range sums {
		items[i] = map[string]any{"id": s.ID.String(), "to": addr, "from": s.From, "subject": s.Subject,
			"received_at": s.ReceivedAt.UTC().Format(apiTime), "status": string(s.Status)}
	}
	want := map[string]any{"data": map[string]any{
		"items":      items,
		"pagination": map[string]any{"limit": 2, "offset": 1, "has_more": more},
	}}
	r := u.do("GET", "/messages?limit=2&offset=1", "")
	u.want(r, 200, "")
	sameJSON(t, "GET /messages", r.raw, want)

	for _, s := range sums {
		msg, err := e.store.Message(context.Background(), sess, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		view := map[string]any{"id": msg.ID.String(), "to": addr, "from": msg.From, "subject": msg.Subject,
			"received_at": msg.ReceivedAt.UTC().Format(apiTime), "status": string(msg.Status), "text_body": msg.Text, "html_body": msg.HTML}
		r := u.do("GET", "/messages/"+s.ID.String(), "")
		u.want(r, 200, "")
		sameJSON(t, "GET /messages/"+s.Subject, r.raw, map[string]any{"data": map[string]any{"message": view}})
	}
}

// apiTime is the API's time format (RFC 3339, UTC, milliseconds).
const apiTime = "2006-01-02T15:04:05.000Z07:00"

// sameJSON compares a response body with want encoded by encoding/json, as
// values (object member order aside).
func sameJSON(t *testing.T, what string, raw []byte, want any) {
	t.Helper()
	enc, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %q: %v", what, raw, err)
	}
	if err := json.Unmarshal(enc, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s:\n got %s\nwant %s", what, raw, enc)
	}
}

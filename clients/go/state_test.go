package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// TestStateMailboxTimes: a mailbox time the service gave none of is null in
// a state, as TypeScript and Python write it, and reads back as none; a
// given one is RFC 3339 (clients/SCENARIOS.md, "Save and restore").
func TestStateMailboxTimes(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1/v1")
	if err != nil {
		t.Fatal(err)
	}
	// As the TypeScript or Python client writes a permanent inbox's state.
	in, err := c.Restore(client.State{Version: 1, Base: "http://127.0.0.1:1/v1",
		Mailbox: client.Mailbox{ID: "m1", Address: "a@mayfly.test", Kind: "permanent"}, Seen: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(in.State())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"expires_at":null,"max_expires_at":null`) {
		t.Fatalf("state of a mailbox without times: %s; want null times", b)
	}
	var st client.State
	if err := json.Unmarshal(b, &st); err != nil || !st.Mailbox.ExpiresAt.IsZero() {
		t.Fatalf("read back: %+v, %v", st.Mailbox, err)
	}
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	b, _ = json.Marshal(client.Mailbox{ID: "m2", ExpiresAt: at, MaxExpiresAt: at.Add(time.Hour)})
	if !strings.Contains(string(b), `"expires_at":"2026-11-25T09:00:00Z","max_expires_at":"2026-11-25T10:00:00Z"`) {
		t.Fatalf("mailbox with times: %s", b)
	}
}

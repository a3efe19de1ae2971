package edge

import (
	"testing"
	"time"
)

// The hint lets a client's first half of its limit each second go with its
// read, sends the rest the sequential way, and starts again each second; a
// refusal sends the client the sequential way for the rest of the second.
func TestRateHint(t *testing.T) {
	h := newRateHint()
	now := time.Unix(1_800_000_000, 0)
	for i := range 6 {
		if got, want := h.take("198.51.100.1", now, 8), i < 4; got != want {
			t.Fatalf("request %d: together %v, want %v", i+1, got, want)
		}
	}
	if !h.take("198.51.100.2", now, 8) {
		t.Error("another client was sent the sequential way")
	}
	next := now.Add(time.Second)
	if !h.take("198.51.100.1", next, 8) {
		t.Error("the next second did not start again")
	}
	h.refused("198.51.100.1", next)
	if h.take("198.51.100.1", next.Add(500*time.Millisecond), 8) {
		t.Error("a refused client went together in the same second")
	}
	if !h.take("198.51.100.1", next.Add(time.Second), 8) {
		t.Error("a refusal outlived its second")
	}
	if h.take("198.51.100.3", now, 1) {
		t.Error("a limit of 1 has no half to go together in")
	}
}

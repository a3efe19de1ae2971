package client

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestSSETable runs every case of clients/testdata/sse.json (the stream's
// parsing rules, shared with the TypeScript and Python clients) through
// the parser, fed chunk by chunk.
func TestSSETable(t *testing.T) {
	b, err := os.ReadFile("../testdata/sse.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name     string     `json:"name"`
			Chunks   []string   `json:"chunks"`
			Events   []sseEvent `json:"events"`
			Comments []string   `json:"comments"`
			Retry    *int64     `json:"retry"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil || len(file.Cases) == 0 {
		t.Fatalf("sse.json: %v", err)
	}
	for _, tc := range file.Cases {
		var p sseParser
		events, comments := []sseEvent{}, []string{}
		for _, c := range tc.Chunks {
			p.feed([]byte(c), func(ev sseEvent) bool { events = append(events, ev); return true },
				func(c string) bool { comments = append(comments, c); return true })
		}
		if !slices.Equal(events, tc.Events) {
			t.Errorf("%s: events %+v; want %+v", tc.Name, events, tc.Events)
		}
		if !slices.Equal(comments, tc.Comments) {
			t.Errorf("%s: comments %q; want %q", tc.Name, comments, tc.Comments)
		}
		switch {
		case tc.Retry == nil && p.retrySet:
			t.Errorf("%s: retry %v; want none", tc.Name, p.retry)
		case tc.Retry != nil && (!p.retrySet || p.retry.Milliseconds() != *tc.Retry):
			t.Errorf("%s: retry %v (set %v); want %d ms", tc.Name, p.retry, p.retrySet, *tc.Retry)
		}
	}
}

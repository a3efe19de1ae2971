package edge_test

import (
	"sync"
	"testing"
	"time"
)

// TestRequestRateLimitReadsTogether: GET /messages sends its rate count and
// its read at once while the client is well under its limit (issue 35); the
// limit stays exact, and a refused read sends nothing of the page.
func TestRequestRateLimitReadsTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the spec's 8 per second
	owner := e.newUser("")
	box := owner.open()
	e.deliver(box["address"].(string), "together")
	var codes map[int]int
	e.inOneWindow(300*time.Millisecond, func(ip string) {
		owner.ip = ip
		codes = map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 14 {
			path := "/messages"
			if i%2 == 1 {
				path = "/messages?limit=1"
			}
			wg.Go(func() {
				r := owner.do("GET", path, "")
				mu.Lock()
				codes[r.status]++
				mu.Unlock()
				switch r.status {
				case 200:
					if items, _ := r.body["data"].(map[string]any)["items"].([]any); len(items) != 1 {
						t.Errorf("200 with items %v, want the one message", items)
					}
				case 429:
					if r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") != "1" || r.body["data"] != nil {
						t.Errorf("429 %s Retry-After %q body %s", r.code(), r.header.Get("Retry-After"), r.raw)
					}
				}
			})
		}
		wg.Wait()
	})
	if codes[200] != 8 || codes[429] != 6 {
		t.Errorf("statuses = %v, want 8×200 and 6×429", codes)
	}

	// A node that has not seen the client sends its count and its read
	// together, and the count refuses: the 429 carries nothing of the page.
	other := e.sibling(t)
	via := &user{e: other, hc: owner.hc}
	e.inOneWindow(300*time.Millisecond, func(ip string) {
		owner.ip, via.ip = ip, ip
		for range 8 {
			owner.want(owner.do("GET", "/messages", ""), 200, "")
		}
		r := via.do("GET", "/messages", "")
		if r.status != 429 || r.code() != "RATE_LIMITED" || r.body["data"] != nil {
			t.Errorf("the ninth request, through another node: %d %s", r.status, r.raw)
		}
	})
}

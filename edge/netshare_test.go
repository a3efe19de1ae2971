package edge_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
)

// TestNetworkShareOfCreations: 60 clients (IPv6 /64s) of one /48 create 5
// inboxes each, within their own limits, against a global cap scaled down
// to 200 a minute. With the networks' shares (storage layout 2026-11-26)
// the /48 gets its share of 60 and no more, each refusal is
// CREATION_RATE_LIMITED naming the network with a Retry-After, and a
// client outside it still creates. Without them, the /48 took every
// creation the global cap allowed and the outside client got
// GLOBAL_CREATION_LIMIT. The active share caps the network's live inboxes
// the same way.
func TestNetworkShareOfCreations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *edge.Config, rl *ratelimit.Config) {
		rl.GlobalCreatePerMinute = 200
		rl.RequestsPerSecond = 100
	})
	e.limiter.SetNetworkShares(true)
	e.awaitWindow(time.Minute, 20*time.Second)
	var created, netRefused atomic.Int64
	var other sync.Map
	var wg sync.WaitGroup
	for c := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := e.newUser(fmt.Sprintf("2001:db8:48:%x::1", c+1))
			for range 5 {
				r := u.do("POST", "/mailboxes", "{}")
				switch {
				case r.status == 201:
					created.Add(1)
				case r.status == 429 && r.code() == "CREATION_RATE_LIMITED" && strings.Contains(string(r.raw), "network") && r.header.Get("Retry-After") != "":
					netRefused.Add(1)
				default:
					other.Store(fmt.Sprintf("%d %s", r.status, r.code()), true)
				}
			}
		}()
	}
	wg.Wait()
	other.Range(func(k, _ any) bool { t.Errorf("an answer neither 201 nor the network's 429: %s", k); return true })
	t.Logf("one /48: %d created, %d refused for its network", created.Load(), netRefused.Load())
	if created.Load() != 60 || netRefused.Load() != 240 {
		t.Errorf("one /48 created %d and was refused %d times for its network; want 60 (its share) and 240", created.Load(), netRefused.Load())
	}
	outside := e.newUser("2001:db8:99::1")
	outside.want(outside.do("POST", "/mailboxes", "{}"), 201, "")

	// The active share: a network of 4 live inboxes at most.
	a := newEnv(t, func(_ *edge.Config, rl *ratelimit.Config) { rl.NetActive = 4; rl.ActivePerClient = 2 })
	a.limiter.SetNetworkShares(true)
	var users []*user
	for c := range 3 {
		users = append(users, a.newUser(fmt.Sprintf("198.51.100.%d", c+1)))
	}
	users[0].create("{}")
	users[0].create("{}")
	users[1].open()
	users[1].create("{}")
	users[2].want(users[2].do("POST", "/mailboxes", "{}"), 429, "ACTIVE_INBOX_LIMIT")
	// Deleting one frees its network's slot too.
	users[1].want(users[1].do("DELETE", "/mailboxes/current", ""), 204, "")
	users[2].create("{}")
	a.newUser("198.51.101.1").create("{}")
}

package edge_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
)

// BenchmarkListMessages measures the hot path, GET /v1/messages with a valid
// session and 20 messages in the inbox, over real HTTP against the cluster:
// one rate-limit script and one list script per request. Every request gets
// its own client IP (X-Forwarded-For through the trusted loopback proxy) so
// the limit is exercised, not tripped.
//
//	make cluster-up
//	MAYFLY_TEST_REDIS_ADDRS=$(deploy/cluster.sh addrs) go test ./edge -run '^$' -bench ListMessages -benchmem
func BenchmarkListMessages(b *testing.B) {
	e := newEnv(b, func(_ *edge.Config, r *ratelimit.Config) {})
	u := e.newUser("")
	m := u.open()
	for i := range 20 {
		e.deliver(m["address"].(string), fmt.Sprintf("%06d", i))
	}
	var cookie string
	for _, c := range u.hc.Jar.Cookies(mustURL(e.base)) {
		if c.Name == "service_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	var n atomic.Uint64
	b.SetParallelism(16) // 32 concurrent clients on this 2-core machine
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			req, _ := http.NewRequest("GET", e.base+"/messages", nil)
			req.Header.Set("Cookie", cookie)
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.%d.%d.%d", 18+byte(i>>16)&1, byte(i>>8), byte(i))) // benchmark range; a header, no traffic
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"has_more":false`) {
				b.Errorf("status %d: %.200s", resp.StatusCode, body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

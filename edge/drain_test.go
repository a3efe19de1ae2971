package edge_test

import (
	"io"
	"net/http"
	"testing"
)

// TestDrainClosesConnections: once the node drains, every answer still
// serves but closes its connection, so a keep-alive client's next request
// opens a new one, which the load balancer gives another node.
func TestDrainClosesConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := &http.Client{}
	get := func() *http.Response {
		t.Helper()
		res, err := c.Get(e.base + "/domains")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	if res := get(); res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("before the drain: %d, Connection: close %v; want 200 on a kept connection", res.StatusCode, res.Close)
	}
	e.srv.Drain()
	for range 2 {
		if res := get(); res.StatusCode != http.StatusOK || !res.Close {
			t.Errorf("draining: %d, Connection: close %v; want 200 and the connection closed", res.StatusCode, res.Close)
		}
	}
}

package edge

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The connection and stream gauges stand beside their caps, so that an
// alert divides one by the other; open connections count from the accept.
func TestServerGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(nil, nil, Config{MaxConns: 7, MaxStreams: 5}, nil, NewMetrics(reg))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.http.Shutdown() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gauge := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	for deadline := time.Now().Add(2 * time.Second); gauge("mayfly_http_conns_open") != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for name, want := range map[string]float64{"mayfly_http_conns_open": 1, "mayfly_http_conns_max": 7,
		"mayfly_events_streams_open": 0, "mayfly_events_streams_max": 5} {
		if got := gauge(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

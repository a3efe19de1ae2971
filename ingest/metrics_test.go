package ingest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The caps are exported beside the gauges they bound, with the defaults
// applied (MaxBufferBytes never below MaxMessageBytes).
func TestCapGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(nil, nil, nil, Config{MaxSessions: 12, MaxMessageBytes: 1 << 20, MaxBufferBytes: 1000}, nil, NewMetrics(reg))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) == 1 && m[0].GetGauge() != nil {
			got[mf.GetName()] = m[0].GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{"mayfly_smtp_sessions_max": 12, "mayfly_smtp_buffer_bytes_max": 1 << 20} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

package load

import (
	"encoding/json"
	"io"
	"slices"
	"time"
)

// Result is what every load tool prints as one JSON line on stdout, for
// bench/cmd/benchrun to read.
type Result struct {
	Tool     string  `json:"tool"`
	Ops      int     `json:"ops"`    // completed operations (messages, requests, events)
	Errors   int     `json:"errors"` // failed operations
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"rate"` // Ops per second
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	FirstErr string  `json:"first_error,omitempty"`
	// Extra figures of one tool (sseload: RSS, streams).
	Extra map[string]float64 `json:"extra,omitempty"`
}

// Summarize fills the counts, rate and percentiles from latencies.
func Summarize(tool string, lat []time.Duration, errors int, elapsed time.Duration) Result {
	r := Result{Tool: tool, Ops: len(lat), Errors: errors, Seconds: elapsed.Seconds()}
	if elapsed > 0 {
		r.Rate = float64(len(lat)) / elapsed.Seconds()
	}
	if len(lat) > 0 {
		s := slices.Clone(lat)
		slices.Sort(s)
		r.P50ms = ms(Percentile(s, 50))
		r.P99ms = ms(Percentile(s, 99))
		r.MaxMs = ms(s[len(s)-1])
	}
	return r
}

// Percentile returns the p-th percentile (nearest rank) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Print writes r as one JSON line.
func (r Result) Print(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

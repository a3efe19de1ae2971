package edge

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendTime checks the hand-written formatter against formatTime on
// the edges of every field and on random instants, zones included.
func TestAppendTime(t *testing.T) {
	zone := time.FixedZone("x", -7*3600-30*60)
	times := []time.Time{
		time.Unix(0, 0), time.UnixMilli(1), time.UnixMilli(999),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2026, 2, 28, 0, 0, 0, 1_000_000, time.UTC),
		time.Date(2028, 2, 29, 12, 30, 45, 123_456_789, zone),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // the general path
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for range 10000 {
		times = append(times, time.UnixMilli(rand.Int64N(4e12)).In(zone))
	}
	for _, tm := range times {
		if got, want := string(appendTime(nil, tm)), formatTime(tm); got != want {
			t.Fatalf("appendTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

package client

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryWait pins the retry table of clients/SCENARIOS.md for one error
// at a time: what is retried, after how long, and that a Retry-After over
// MaxRetryAfter is returned rather than waited, whatever the status.
func TestRetryWait(t *testing.T) {
	p := RetryPolicy{}.withDefaults()
	for _, tc := range []struct {
		name     string
		e        Error
		kind     callKind
		min, max time.Duration // 0, 0: not retried
	}{
		{"request rate on creation", Error{Status: 429, Code: "RATE_LIMITED", RetryAfter: time.Second}, kindCreate, time.Second, time.Second + 250*time.Millisecond},
		{"request protection on a write", Error{Status: 503, Code: "REQUEST_PROTECTION"}, kindWrite, time.Second, time.Second + 250*time.Millisecond},
		{"creation limit", Error{Status: 429, Code: "CREATION_RATE_LIMITED", RetryAfter: 2 * time.Second}, kindCreate, 0, 0},
		{"request rate, long Retry-After", Error{Status: 429, Code: "RATE_LIMITED", RetryAfter: time.Minute}, kindRead, 0, 0},
		{"503 on a read", Error{Status: 503, Code: "DEPENDENCY_UNAVAILABLE"}, kindRead, time.Millisecond, p.BaseDelay + time.Millisecond},
		{"503 on a read, Retry-After 2 s", Error{Status: 503, Code: "DEPENDENCY_UNAVAILABLE", RetryAfter: 2 * time.Second}, kindRead, 2 * time.Second, 2 * time.Second},
		{"503 on a read, long Retry-After", Error{Status: 503, Code: "DEPENDENCY_UNAVAILABLE", RetryAfter: 30 * time.Second}, kindRead, 0, 0},
		{"500 on a read, long Retry-After", Error{Status: http.StatusInternalServerError, Code: "INTERNAL", RetryAfter: 30 * time.Second}, kindRead, 0, 0},
		{"503 on creation", Error{Status: 503, Code: "DEPENDENCY_UNAVAILABLE"}, kindCreate, 0, 0},
	} {
		got := retryWait(p, &tc.e, tc.kind, 1)
		if got < tc.min || got > tc.max {
			t.Errorf("%s: wait %v, want %v..%v", tc.name, got, tc.min, tc.max)
		}
	}
}

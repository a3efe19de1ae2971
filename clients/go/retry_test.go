package client

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// retryCase is one row of clients/testdata/retry.json.
type retryCase struct {
	Name        string  `json:"name"`
	Kind        string  `json:"kind"`
	Attempt     int     `json:"attempt"`
	Status      int     `json:"status"`
	Code        *string `json:"code"`
	RetryAfter  *string `json:"retry_after"`
	Transport   string  `json:"transport"`
	RemainingMS *int64  `json:"remaining_ms"`
	Want        string  `json:"want"`
	WaitMS      []int64 `json:"wait_ms"`
}

// TestRetryTable runs every case of clients/testdata/retry.json (the
// table of clients/SCENARIOS.md, "Retries", shared with the TypeScript and
// Python clients) against retryDecision, many draws each: every wait drawn
// is within the case's range, and a give-up never retries.
func TestRetryTable(t *testing.T) {
	b, err := os.ReadFile("../testdata/retry.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Policy struct {
			BaseMS         int64 `json:"base_ms"`
			CapMS          int64 `json:"cap_ms"`
			MaxAttempts    int   `json:"max_attempts"`
			MaxRetryAfterS int64 `json:"max_retry_after_s"`
			JitterMS       int64 `json:"jitter_ms"`
		} `json:"policy"`
		Cases []retryCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil || len(file.Cases) == 0 {
		t.Fatalf("retry.json: %v (%d cases)", err, len(file.Cases))
	}
	pol := file.Policy
	p := RetryPolicy{}.withDefaults()
	if p.BaseDelay != time.Duration(pol.BaseMS)*time.Millisecond || p.MaxDelay != time.Duration(pol.CapMS)*time.Millisecond ||
		p.MaxAttempts != pol.MaxAttempts || p.MaxRetryAfter != time.Duration(pol.MaxRetryAfterS)*time.Second ||
		retryJitter != time.Duration(pol.JitterMS)*time.Millisecond {
		t.Fatalf("the default policy %+v (jitter %v) is not retry.json's %+v", p, retryJitter, pol)
	}
	kinds := map[string]callKind{"read": kindRead, "create": kindCreate, "write": kindWrite, "wait": kindWait}
	for _, tc := range file.Cases {
		kind, ok := kinds[tc.Kind]
		if !ok {
			t.Fatalf("%s: kind %q", tc.Name, tc.Kind)
		}
		o := outcome{status: tc.Status, transport: tc.Transport}
		if tc.Code != nil {
			o.code = *tc.Code
		}
		if tc.RetryAfter != nil {
			o.retryAfter, o.retryAfterSet = retryAfter(*tc.RetryAfter)
		}
		left, hasDeadline := time.Duration(0), tc.RemainingMS != nil
		if hasDeadline {
			left = time.Duration(*tc.RemainingMS) * time.Millisecond
		}
		lo, hi := time.Duration(-1), time.Duration(-1)
		for range 200 {
			wait, retry := retryDecision(p, kind, tc.Attempt, o, left, hasDeadline)
			switch {
			case tc.Want == "give_up" && retry:
				t.Fatalf("%s: retried after %v; want give up", tc.Name, wait)
			case tc.Want == "retry" && !retry:
				t.Fatalf("%s: gave up; want a retry", tc.Name)
			case tc.Want == "retry":
				from, to := time.Duration(tc.WaitMS[0])*time.Millisecond, time.Duration(tc.WaitMS[1])*time.Millisecond
				if wait < from || wait > to {
					t.Fatalf("%s: wait %v; want %v..%v", tc.Name, wait, from, to)
				}
				if lo < 0 || wait < lo {
					lo = wait
				}
				hi = max(hi, wait)
			}
		}
		// A range wider than a millisecond is drawn, not fixed.
		if tc.Want == "retry" && tc.WaitMS[1]-tc.WaitMS[0] > 50 && hi-lo < 5*time.Millisecond {
			t.Errorf("%s: 200 waits within %v..%v; want them drawn over %v ms", tc.Name, lo, hi, tc.WaitMS)
		}
	}
}

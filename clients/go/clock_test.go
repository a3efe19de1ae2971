package client

import (
	"net/url"
	"os"
	"testing"
	"time"
)

// clockShift is how far this package's tests move the client's calendar
// (wallClock): decades past any date a test spells, so a literal date mixed
// with the real clock fails today rather than on the day the date goes by
// (TestJar did, on 2026-11-23 13:00 UTC). Durations are untouched.
const clockShift = 40 * 365 * 24 * time.Hour

func TestMain(m *testing.M) {
	wallClock = func() time.Time { return time.Now().Add(clockShift) }
	os.Exit(m.Run())
}

// TestClockShifted guards the guard: if TestMain stopped shifting the clock,
// the date tests would silently go back to depending on the calendar.
func TestClockShifted(t *testing.T) {
	if got := time.Until(wallClock()); got < clockShift-time.Hour {
		t.Fatalf("wallClock is %v from now, want about %v", got, clockShift)
	}
	if got := time.Until(newJar(&url.URL{Scheme: "http", Host: "x"}).now()); got < clockShift-time.Hour {
		t.Fatalf("a new jar's clock is %v from now, want about %v", got, clockShift)
	}
}

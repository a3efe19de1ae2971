package client

import (
	"flag"
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
	shifted := func() time.Time { return time.Now().Add(clockShift) }
	wallClock = shifted
	if ExamplesMain == nil {
		os.Exit(m.Run())
	}
	// The examples that talk to a real service (example_main_test.go) take
	// its cookies' dates: they run after the tests, on the real calendar.
	phases, stop := ExamplesMain()
	code := 0
	for _, p := range phases {
		if p.RealClock {
			wallClock = time.Now
		} else {
			wallClock = shifted
		}
		if p.Run != "" {
			flag.Set("test.run", p.Run)
		}
		if c := m.Run(); c != 0 {
			code = c
		}
	}
	stop()
	os.Exit(code)
}

// ExamplesMain, set by the external test package (example_main_test.go),
// starts what the examples run against and says how to run the tests and
// examples: in phases (a -test.run each, on the shifted calendar or the
// real one), then stop.
var ExamplesMain func() (phases []TestPhase, stop func())

// TestPhase is one m.Run of TestMain.
type TestPhase struct {
	Run       string // -test.run for it; "" keeps the command line's
	RealClock bool
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

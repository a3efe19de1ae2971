package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// devEnv reads deploy/dev.env the way deploy/lib.sh's load_profile does:
// every MAYFLY_*=value line.
func devEnv(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../../deploy/dev.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	key := regexp.MustCompile(`^MAYFLY_[A-Z0-9_]+$`)
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && key.MatchString(k) {
			env[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// The suite the dev profile is sized for (issue 27): 1,000 tests from one
// IP within a minute, each creating an inbox and receiving 2 mails, each
// mail on its own SMTP connection, run again right after (so two runs share
// a one-minute window); up to 200 tests at once, each with a keep-alive
// connection and an event stream open; inboxes live their default 10
// minutes, so ten runs' inboxes are alive at once.
const (
	suiteTests    = 1000
	suiteMails    = 2
	suiteRuns     = 2 // in one minute
	suiteParallel = 200
	suiteLive     = 10 // runs whose inboxes are alive at once
)

// TestDevProfileFitsATestSuite: every limit a local suite from one IP meets
// is above what the suite above needs, per deploy/dev.env read through the
// real configuration loader.
func TestDevProfileFitsATestSuite(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	env["MAYFLY_REDIS_ADDRS"] = "127.0.0.1:6379"
	c, _ := configCase(t, env, "")
	perMinute := suiteTests * suiteRuns
	for _, l := range []struct {
		name      string
		got, need int
	}{
		{"MAYFLY_SMTP_CONN_PER_MINUTE", c.smtp.connPerMinute, perMinute * suiteMails},
		{"MAYFLY_SMTP_MAIL_PER_MINUTE", c.smtp.mailPerMinute, perMinute * suiteMails},
		{"MAYFLY_SMTP_SESSIONS_PER_IP", c.smtp.sessionsPerIP, suiteParallel * suiteMails},
		// One IP is one network (/24): the per-network caps meet the suite too.
		{"MAYFLY_SMTP_SESSIONS_PER_NET", c.smtp.sessionsPerNet, suiteParallel * suiteMails},
		{"MAYFLY_SMTP_MAX_SESSIONS", c.smtp.maxSessions, suiteParallel * suiteMails},
		{"MAYFLY_RATE_CREATE_PER_MINUTE", c.createPerMinute, perMinute},
		{"MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE", c.globalPerMinute, perMinute},
		{"MAYFLY_RATE_CREATE_PER_HOUR", c.createPerHour, 60 * suiteTests},
		{"MAYFLY_RATE_CREATE_PER_DAY", c.createPerDay, 8 * 60 * suiteTests},
		{"MAYFLY_RATE_ACTIVE_PER_IP", c.activePerIP, suiteLive * suiteTests},
		// ~6 requests per test (create, select, waits, read), all
		// parallel tests starting in the same second.
		{"MAYFLY_RATE_REQUESTS_PER_SECOND", c.ratePerSecond, 6 * suiteParallel},
		{"MAYFLY_HTTP_CONNS_PER_IP", c.connsPerIP, 2 * suiteParallel},
		{"MAYFLY_HTTP_CONNS_PER_NET", c.connsPerNet, 2 * suiteParallel},
	} {
		if l.got < l.need {
			t.Errorf("dev profile: %s = %d, a 1,000-test suite from one IP needs at least %d", l.name, l.got, l.need)
		}
	}
	// make cluster-demo's haproxy, per 10 s where a rate.
	lb := func(k string) int { n, _ := strconv.Atoi(env[k]); return n }
	for _, l := range []struct {
		name string
		need int
	}{
		{"MAYFLY_LB_SMTP_CONNS_PER_IP", suiteParallel * suiteMails},
		{"MAYFLY_LB_SMTP_CONNS_PER_NET", suiteParallel * suiteMails},
		{"MAYFLY_LB_SMTP_CONN_RATE", perMinute * suiteMails / 6},
		{"MAYFLY_LB_HTTP_CONNS_PER_IP", 2 * suiteParallel},
		{"MAYFLY_LB_HTTP_CONNS_PER_IP_HARD", 2 * suiteParallel},
		{"MAYFLY_LB_HTTP_CONNS_PER_NET", 2 * suiteParallel},
		{"MAYFLY_LB_HTTP_CONNS_PER_NET_HARD", 2 * suiteParallel},
		{"MAYFLY_LB_HTTP_REQ_RATE", 10 * 6 * suiteParallel},
	} {
		if got := lb(l.name); got < l.need {
			t.Errorf("dev profile: %s = %d, a 1,000-test suite from one IP needs at least %d (make cluster-demo's haproxy)", l.name, got, l.need)
		}
	}
	if c.cookieSecure {
		t.Error("dev profile: cookies are Secure; the local API is plain http")
	}
}

// TestDevProfileSMTPBurst: `mayfly all` with deploy/dev.env takes a burst
// of 300 SMTP connections from one IP, 100 at once, each delivering one
// message (the public limits refuse the 61st connection, and the 21st open
// one, with 421 4.7.0).
func TestDevProfileSMTPBurst(t *testing.T) {
	t.Parallel()
	s := startStack(t, devEnv(t))
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	var created struct {
		Data struct{ Mailbox struct{ Address string } }
	}
	call(t, client, "POST", s.api+"/mailboxes", "{}", http.StatusCreated, &created)
	to := created.Data.Mailbox.Address

	const burst, atOnce = 300, 100
	start := time.Now()
	var (
		wg       sync.WaitGroup
		sent     atomic.Int32
		slots    = make(chan struct{}, atOnce)
		failures = make(chan error, burst)
	)
	for i := range burst {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := smtp.SendMail(s.smtp, nil, "app@example.com", []string{to},
				fmt.Appendf(nil, "Subject: burst %d\r\n\r\nmessage %d\r\n", i, i))
			if err != nil {
				failures <- err
				return
			}
			sent.Add(1)
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Errorf("send: %v", err)
		break
	}
	if got := sent.Load(); got != burst {
		t.Errorf("%d of %d messages accepted from one IP", got, burst)
	}
	t.Logf("%d connections from one IP in %v", burst, time.Since(start).Round(time.Millisecond))
}

// docs/testing.md's GitHub Actions example spells the dev profile out (a service
// container takes no env file): it must carry every Mayfly setting of
// deploy/dev.env with its value, or a suite run that way meets the public
// limits the profile exists to lift. haproxy's MAYFLY_LB_* are left out:
// that example has no haproxy.
func TestTestingDocActionsExampleCarriesTheDevProfile(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "docs/testing.md")
	_, block, ok := strings.Cut(readme, "# the dev profile (deploy/dev.env)\n")
	if !ok {
		t.Fatal("docs/testing.md: no '# the dev profile (deploy/dev.env)' in the Actions example")
	}
	line := regexp.MustCompile(`^\s+(MAYFLY_[A-Z0-9_]+): "([^"]*)"$`)
	example := map[string]string{}
	for l := range strings.Lines(block) {
		m := line.FindStringSubmatch(strings.TrimRight(l, "\n"))
		if m == nil {
			break
		}
		example[m[1]] = m[2]
	}
	profile := devEnv(t)
	for k, v := range profile {
		if strings.HasPrefix(k, "MAYFLY_LB_") {
			continue
		}
		if got, ok := example[k]; !ok || got != v {
			t.Errorf("docs/testing.md's Actions example: %s is %q (set: %v), deploy/dev.env has %q", k, got, ok, v)
		}
	}
	for k := range example {
		if _, ok := profile[k]; !ok {
			t.Errorf("docs/testing.md's Actions example sets %s, which deploy/dev.env does not", k)
		}
	}
}

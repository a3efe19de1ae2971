package main

// The scenarios of clients/SCENARIOS.md for the Go client, each against a
// real stack: an in-process `mayfly all` on the test cluster, mail over
// real SMTP. clients/check-scenarios.sh checks every scenario id is named
// here ("scenario: <id>").

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/smtp"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// scenarioLimits is the stack of SCENARIOS.md: the spec's request rate (8/s)
// and creation limits that allow a suite's inboxes.
var scenarioLimits = map[string]string{
	"MAYFLY_RATE_REQUESTS_PER_SECOND": "8",
	"MAYFLY_RATE_CREATE_PER_MINUTE":   "100",
	"MAYFLY_RATE_CREATE_PER_HOUR":     "1000",
	"MAYFLY_RATE_CREATE_PER_DAY":      "10000",
	"MAYFLY_RATE_ACTIVE_PER_IP":       "50",
}

// counting counts the answers of each status that pass through it.
type counting struct {
	mu     sync.Mutex
	status map[int]int
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		if c.status == nil {
			c.status = map[int]int{}
		}
		c.status[resp.StatusCode]++
		c.mu.Unlock()
	}
	return resp, err
}

func (c *counting) count(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status[status]
}

// sendMail delivers one raw message; from a goroutine of its own too (it
// reports with Errorf).
func sendMail(t *testing.T, addr, to, raw string) {
	t.Helper()
	if err := smtp.SendMail(addr, nil, "shop@example.com", []string{to}, []byte(raw)); err != nil {
		t.Errorf("SendMail: %v", err)
	}
}

func codeMail(to, subject, code string) string {
	return "From: Shop <shop@example.com>\r\nTo: <" + to + ">\r\nSubject: " + subject + "\r\n" +
		"Message-ID: <" + fmt.Sprint(time.Now().UnixNano()) + "@example.com>\r\n\r\n" +
		"Welcome! Your verification code is " + code + ".\r\nIt expires in 10 minutes.\r\n"
}

// scenarioInbox starts a stack with the scenario limits and creates an
// inbox on it with a client of its own, under a context of the given
// timeout that ends with the test.
func scenarioInbox(t *testing.T, timeout time.Duration) (*stack, context.Context, *client.Inbox) {
	t.Helper()
	s := startStack(t, scenarioLimits)
	c, _ := client.New(s.api)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	in, err := c.CreateInbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx, in
}

// TestScenarioSignupFlow — scenario: signup-flow
func TestScenarioSignupFlow(t *testing.T) {
	t.Parallel()
	s, ctx, in := scenarioInbox(t, 30*time.Second)
	addr := in.Mailbox().Address
	go sendMail(t, s.smtp, addr, codeMail(addr, "Your verification code", "482913"))
	msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`verification code`)})
	if err != nil {
		t.Fatal(err)
	}
	if code, ok := client.Code(msg, nil); !ok || code != "482913" {
		t.Fatalf("Code = %q, %v; want 482913", code, ok)
	}
	if err := in.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// TestScenarioResendCode — scenario: resend-code
func TestScenarioResendCode(t *testing.T) {
	t.Parallel()
	s, ctx, in := scenarioInbox(t, 30*time.Second)
	addr := in.Mailbox().Address
	match := client.Match{Subject: regexp.MustCompile(`^Your code$`)}
	sendMail(t, s.smtp, addr, codeMail(addr, "Your code", "111111"))
	first, err := in.WaitForMessage(ctx, match)
	if code, _ := client.Code(first, nil); err != nil || code != "111111" {
		t.Fatalf("first wait: code %q, %v; want 111111", code, err)
	}
	// "Resend": the same wait again gets the second code, not the first.
	go func() {
		time.Sleep(300 * time.Millisecond)
		sendMail(t, s.smtp, addr, codeMail(addr, "Your code", "222222"))
	}()
	second, err := in.WaitForMessage(ctx, match)
	if code, _ := client.Code(second, nil); err != nil || code != "222222" {
		t.Fatalf("second wait: code %q, %v; want 222222 (the resent code)", code, err)
	}
	// The other since modes over the same inbox: after the first message,
	// and after a time, both give the second; "now" gives only what comes.
	for name, since := range map[string]client.Since{
		"message": client.SinceMessage(first.ID),
		"time":    client.SinceTime(first.ReceivedAt),
	} {
		got, err := in.WaitForMessage(ctx, client.Match{Subject: match.Subject, Since: since})
		if err != nil || got.ID != second.ID {
			t.Fatalf("since %s: %s, %v; want the second message %s", name, got.ID, err, second.ID)
		}
	}
	// "now" is when the wait's first list is answered, which a request-rate
	// 429 (this test makes many calls in a second) delays by a second or
	// two: the mail goes later than that.
	go func() {
		time.Sleep(3 * time.Second)
		sendMail(t, s.smtp, addr, codeMail(addr, "Your code", "333333"))
	}()
	third, err := in.WaitForMessage(ctx, client.Match{Subject: match.Subject, Since: client.SinceNow()})
	if code, _ := client.Code(third, nil); err != nil || code != "333333" {
		t.Fatalf("since now: code %q, %v; want 333333", code, err)
	}
	// Text matching reads the body.
	got, err := in.WaitForMessage(ctx, client.Match{Text: regexp.MustCompile(`code is 222222`), Since: client.SinceTime(time.Time{})})
	if err != nil || got.ID != second.ID {
		t.Fatalf("match on text: %s, %v; want %s", got.ID, err, second.ID)
	}
}

// TestScenarioParallelCreates — scenario: parallel-creates
// Twelve creations at once from one client: more POST /mailboxes in one
// second than the request rate (8/s) allows, so some creations themselves
// meet a request-rate 429 and are retried (with six, only the selects that
// follow would). A second stack caps live inboxes at 4: eight creations then
// fail at once with the typed creation-limit error, none otherwise.
func TestScenarioParallelCreates(t *testing.T) {
	t.Parallel()
	const creations = 12
	for _, tc := range []struct {
		name   string
		active string
		ok     int
	}{{"limits allow", "50", creations}, {"active cap 4", "4", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			limits := map[string]string{}
			for k, v := range scenarioLimits {
				limits[k] = v
			}
			limits["MAYFLY_RATE_ACTIVE_PER_IP"] = tc.active
			s := startStack(t, limits)
			tr := &counting{}
			c, _ := client.New(s.api, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			var wg sync.WaitGroup
			var ok, limited atomic.Int32
			errs := make(chan error, creations)
			for range creations {
				wg.Go(func() {
					in, err := c.CreateInbox(ctx, time.Minute)
					var e *client.Error
					switch {
					case err == nil && in.Mailbox().Address != "":
						ok.Add(1)
					case errors.Is(err, client.ErrCreationLimit) && errors.As(err, &e):
						limited.Add(1)
					default:
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("creation failed with an untyped error: %v", err)
			}
			t.Logf("%d created, %d creation-limited, %d request-rate 429s retried, in %v",
				ok.Load(), limited.Load(), tr.count(429)-int(limited.Load()), time.Since(start).Round(time.Millisecond))
			if int(ok.Load()) != tc.ok || int(ok.Load()+limited.Load()) != creations {
				t.Fatalf("%d created and %d creation-limited; want %d and %d", ok.Load(), limited.Load(), tc.ok, creations-tc.ok)
			}
		})
	}
}

// TestScenarioEdgeRestartMidWait — scenario: edge-restart-mid-wait
// The node stops while a wait runs and stays down 6 s (its ports refuse
// connections; Redis and the inbox stay), starts again on the same ports,
// then the mail is sent: the wait returns it.
func TestScenarioEdgeRestartMidWait(t *testing.T) {
	t.Parallel()
	s, ctx, in := scenarioInbox(t, 60*time.Second)
	addr := in.Mailbox().Address
	type result struct {
		msg client.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`after the restart`)})
		done <- result{msg, err}
	}()
	time.Sleep(time.Second) // the wait follows the stream
	s.stop()
	down := time.Now()
	if _, err := http.Get(s.api + "/domains"); err == nil {
		t.Fatal("the stopped node still answers")
	}
	select {
	case r := <-done:
		t.Fatalf("the wait ended while the node was down: %+v, %v", r.msg.Subject, r.err)
	case <-time.After(6 * time.Second):
	}
	s.start()
	t.Logf("node down for %v", time.Since(down).Round(time.Millisecond))
	sent := time.Now()
	sendMail(t, s.smtp, addr, codeMail(addr, "after the restart", "777777"))
	r := <-done
	if r.err != nil || r.msg.Subject != "after the restart" {
		t.Fatalf("wait across the restart: %+v, %v", r.msg.Subject, r.err)
	}
	t.Logf("the wait returned the message %v after it was sent (%v after the node went down)",
		time.Since(sent).Round(time.Millisecond), time.Since(down).Round(time.Millisecond))
}

// TestScenarioDeletedInboxEveryCall — scenario: deleted-inbox-every-call
// After Delete every method fails with ErrInboxGone and sends nothing; a
// copy of the inbox (restored from its state, as the CLI does) learns it
// from the service's 401, and so does an inbox that expired.
func TestScenarioDeletedInboxEveryCall(t *testing.T) {
	t.Parallel()
	s := startStack(t, scenarioLimits)
	tr := &counting{}
	c, _ := client.New(s.api, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := c.CreateInbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := in.Mailbox().Address
	sendMail(t, s.smtp, addr, codeMail(addr, "kept", "123456"))
	page, err := in.List(ctx, 10, 0)
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("List: %+v, %v", page, err)
	}
	id := page.Items[0].ID
	copyOf, err := c.Restore(in.State())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	sentBefore := tr.count(200) + tr.count(201) + tr.count(204) + tr.count(401) + tr.count(404)
	everyCall := func(in *client.Inbox) map[string]error {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		errs := map[string]error{}
		_, errs["Current"] = in.Current(ctx)
		_, errs["Select"] = in.Select(ctx)
		_, errs["Extend"] = in.Extend(ctx, 1)
		_, errs["List"] = in.List(ctx, 10, 0)
		for _, err := range in.All(ctx, 10) {
			errs["All"] = err
			break
		}
		_, errs["Message"] = in.Message(ctx, id)
		errs["DeleteMessage"] = in.DeleteMessage(ctx, id)
		_, errs["WaitForMessage"] = in.WaitForMessage(wctx, client.Match{})
		for _, err := range in.Events(wctx) {
			errs["Events"] = err
			break
		}
		errs["Delete"] = in.Delete(ctx)
		return errs
	}
	for name, err := range everyCall(in) {
		if !errors.Is(err, client.ErrInboxGone) {
			t.Errorf("%s after Delete: %v, want ErrInboxGone", name, err)
		}
	}
	if sent := tr.count(200) + tr.count(201) + tr.count(204) + tr.count(401) + tr.count(404); sent != sentBefore {
		t.Errorf("%d requests sent after Delete, want none", sent-sentBefore)
	}
	for name, err := range everyCall(copyOf) {
		if !errors.Is(err, client.ErrInboxGone) {
			t.Errorf("%s on a copy of the deleted inbox: %v, want ErrInboxGone", name, err)
		}
	}
}

// TestScenarioRateLimit429Retried — scenario: rate-limit-429-retried
func TestScenarioRateLimit429Retried(t *testing.T) {
	t.Parallel()
	s := startStack(t, scenarioLimits)
	tr := &counting{}
	c, _ := client.New(s.api, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := c.CreateInbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	const calls = 24 // three seconds' worth at 8/s, all at once
	var failed atomic.Int32
	for i := range calls {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = in.List(ctx, 20, 0)
			} else {
				_, err = in.Current(ctx)
			}
			if err != nil {
				failed.Add(1)
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls at once: %d failed, %d request-rate 429s retried, in %v", calls, failed.Load(), tr.count(429), time.Since(start).Round(time.Millisecond))
	if tr.count(429) == 0 {
		t.Fatal("no 429 seen: the test did not exceed the request rate")
	}
}

// TestScenarioHTMLOnlyLinkAndCode — scenario: html-only-link-and-code
func TestScenarioHTMLOnlyLinkAndCode(t *testing.T) {
	t.Parallel()
	s, ctx, in := scenarioInbox(t, 30*time.Second)
	addr := in.Mailbox().Address
	sendMail(t, s.smtp, addr, "From: Shop <shop@example.com>\r\nTo: <"+addr+">\r\nSubject: Confirm\r\n"+
		"Content-Type: text/html; charset=utf-8\r\n\r\n"+
		`<html><body><p>Hello,</p><p><a href="https://shop.example/confirm?user=42&amp;token=ab%2Fc">Confirm</a></p>`+
		"<p>or enter <b>905172</b></p></body></html>\r\n")
	msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`Confirm`)})
	if err != nil {
		t.Fatal(err)
	}
	links := client.Links(msg)
	if len(links) == 0 || links[0] != "https://shop.example/confirm?user=42&token=ab%2Fc" {
		t.Fatalf("Links = %q; want the unescaped confirm link first\ntext: %q\nhtml: %q", links, msg.TextBody, msg.HTMLBody)
	}
	for _, l := range links {
		if strings.Contains(l, "&amp;") {
			t.Errorf("link %q still escaped", l)
		}
	}
	if code, ok := client.Code(msg, nil); !ok || code != "905172" {
		t.Fatalf("Code = %q, %v; want 905172", code, ok)
	}
}

// TestScenarioWaitTimeout — scenario: wait-timeout
func TestScenarioWaitTimeout(t *testing.T) {
	t.Parallel()
	s := startStack(t, scenarioLimits)
	c, _ := client.New(s.api)
	in, err := c.CreateInbox(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = in.WaitForMessage(ctx, client.Match{})
	took := time.Since(start)
	if !errors.Is(err, client.ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on an empty inbox: %v; want ErrWaitTimeout and context.DeadlineExceeded", err)
	}
	if took < 2*time.Second || took > 3*time.Second {
		t.Fatalf("the 2 s wait ended after %v", took)
	}
}

// TestScenarioCancellation — scenario: cancellation
func TestScenarioCancellation(t *testing.T) {
	t.Parallel()
	s := startStack(t, scenarioLimits)
	c, _ := client.New(s.api)
	in, err := c.CreateInbox(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	time.AfterFunc(500*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	_, err = in.WaitForMessage(ctx, client.Match{})
	after := time.Since(cancelled)
	if !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrWaitTimeout) {
		t.Fatalf("cancelled wait: %v; want context.Canceled", err)
	}
	if after > 200*time.Millisecond {
		t.Fatalf("the wait ended %v after the cancellation", after)
	}
}

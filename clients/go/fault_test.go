package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// fake is a scripted service: an inbox whose behaviour each test sets, and a
// log of every request it saw.
type fake struct {
	t  *testing.T
	mu sync.Mutex
	// messages of the inbox, oldest first
	msgs []client.MessageSummary
	log  []hit
	// handlers by "METHOD /path"; a missing one answers the default
	handlers map[string]http.HandlerFunc
	gone     atomic.Bool // the inbox expired: every session call is 401

	streams, maxStreams atomic.Int32
	srv                 *httptest.Server
}

type hit struct {
	at    time.Time
	route string
}

const fakeID = "6f1c2a4e-8d5b-4b7e-9f0a-3c2d1e0b9a87"

func newFake(t *testing.T) *fake {
	f := &fake{t: t, handlers: map[string]http.HandlerFunc{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) base() string { return f.srv.URL + "/v1" }

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/v1")
	if strings.HasPrefix(route, "GET /messages/") {
		route = "GET /messages/{id}"
	}
	f.mu.Lock()
	f.log = append(f.log, hit{time.Now(), route})
	h := f.handlers[route]
	f.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	if route != "POST /mailboxes" && !strings.HasSuffix(route, "/select") && (f.gone.Load() || !hasCookie(r, "service_session")) {
		apiError(w, 401, "MAILBOX_SESSION_INVALID", 0)
		return
	}
	switch {
	case route == "POST /mailboxes":
		http.SetCookie(w, &http.Cookie{Name: "anyprefix_" + strings.ReplaceAll(fakeID, "-", ""), Value: "scoped", Path: "/v1", HttpOnly: true})
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	case strings.HasSuffix(route, "/select"):
		if !hasCookie(r, "anyprefix_"+strings.ReplaceAll(fakeID, "-", "")) {
			apiError(w, 401, "MAILBOX_CREDENTIAL_REQUIRED", 0)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "service_session", Value: "session", Path: "/v1", HttpOnly: true})
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	case route == "GET /mailboxes/current":
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	case route == "GET /messages":
		f.mu.Lock()
		var items []string
		for i := len(f.msgs) - 1; i >= 0; i-- {
			items = append(items, summaryJSON(f.msgs[i]))
		}
		f.mu.Unlock()
		fmt.Fprintf(w, `{"data":{"items":[%s],"pagination":{"limit":100,"offset":0,"has_more":false}}}`, strings.Join(items, ","))
	case route == "GET /messages/{id}":
		id := strings.TrimPrefix(r.URL.Path, "/v1/messages/")
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range f.msgs {
			if m.ID == id {
				fmt.Fprintf(w, `{"data":{"message":%s}}`, strings.TrimSuffix(summaryJSON(m), "}")+`,"text_body":"body of `+m.Subject+`","html_body":""}`)
				return
			}
		}
		apiError(w, 404, "MESSAGE_NOT_FOUND", 0)
	default:
		apiError(w, 404, "ROUTE_NOT_FOUND", 0)
	}
}

func hasCookie(r *http.Request, name string) bool { _, err := r.Cookie(name); return err == nil }

// apiTime formats t as the API does.
func apiTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// mailboxJSON answers with times from the server's (real) clock, as the
// service does: a fixed date here would be one more test that expires.
func mailboxJSON() string {
	now := time.Now()
	return fmt.Sprintf(`{"id":%q,"address":"abc@mayfly.test","kind":"temporary","expires_at":%q,"max_expires_at":%q}`,
		fakeID, apiTime(now.Add(10*time.Minute)), apiTime(now.Add(time.Hour)))
}

func summaryJSON(m client.MessageSummary) string {
	to := "" // a service older than sub-addressing sends none
	if m.To != "" {
		to = fmt.Sprintf(`,"to":%q`, m.To)
	}
	return fmt.Sprintf(`{"id":%q,"from":%q,"subject":%q,"received_at":%q,"status":%q%s}`, m.ID, m.From, m.Subject, apiTime(time.Now()), m.Status, to)
}

func apiError(w http.ResponseWriter, status int, code string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":"scripted"},"request_id":"r-%d"}`, code, status)
}

func (f *fake) add(subject string) client.MessageSummary { return f.addTo("", subject) }

// addTo adds a message to the recipient to ("": none given, as a service
// older than sub-addressing).
func (f *fake) addTo(to, subject string) client.MessageSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := client.MessageSummary{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", len(f.msgs)+1), From: "s@example.com", Subject: subject, Status: "ready", To: to}
	f.msgs = append(f.msgs, m)
	return m
}

func (f *fake) handle(route string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[route] = h
}

// hits returns the times route was requested.
func (f *fake) hits(route string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Time
	for _, h := range f.log {
		if h.route == route {
			out = append(out, h.at)
		}
	}
	return out
}

func (f *fake) inbox(t *testing.T, opts ...client.Option) *client.Inbox {
	t.Helper()
	c, err := client.New(f.base(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.CreateInbox(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestRetry503Storm: a safe read answered 503 every time is tried exactly
// MaxAttempts times, with waits drawn at random (full jitter) under caps
// that double: over many calls the later waits average about twice the
// earlier ones, and no two calls wait alike.
func TestRetry503Storm(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.handle("GET /messages", func(w http.ResponseWriter, r *http.Request) { apiError(w, 503, "DEPENDENCY_UNAVAILABLE", 0) })
	policy := client.RetryPolicy{MaxAttempts: 5, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}
	in := f.inbox(t, client.WithRetry(policy))
	const calls = 25
	var gaps, over [4][]time.Duration
	for range calls {
		before := len(f.hits("GET /messages"))
		_, err := in.List(context.Background(), 20, 0)
		if !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("List: %v, want ErrUnavailable", err)
		}
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "DEPENDENCY_UNAVAILABLE" || e.RequestID != "r-503" {
			t.Fatalf("error %#v: want the envelope's code and request id", err)
		}
		h := f.hits("GET /messages")[before:]
		if len(h) != policy.MaxAttempts {
			t.Fatalf("%d attempts, want exactly %d", len(h), policy.MaxAttempts)
		}
		for i := 1; i < len(h); i++ {
			gap := h[i].Sub(h[i-1])
			if limit := policy.BaseDelay<<(i-1) + 15*time.Millisecond; gap > limit {
				over[i-1] = append(over[i-1], gap)
			}
			gaps[i-1] = append(gaps[i-1], gap)
		}
	}
	// A wait over its cap (plus the request's own time) is a backoff that
	// ignores its cap, or a machine too busy to wake the client in time:
	// a few of 25 are the machine (2 cores shared with other suites), most
	// would be the client.
	for i, o := range over {
		if len(o) > calls/5 {
			t.Errorf("wait %d over its cap %v in %d of %d calls: %v", i+1, policy.BaseDelay<<i+15*time.Millisecond, len(o), calls, o)
		}
	}
	mean := func(ds []time.Duration) time.Duration {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum / time.Duration(len(ds))
	}
	// Full jitter: the first wait is drawn from [0, 10 ms], the fourth from
	// [0, 80 ms], so their means differ by about 35 ms; each gap also holds
	// the request's own time, which a loaded machine makes larger than the
	// first wait, and which the difference cancels (a ratio would not).
	if m1, m4 := mean(gaps[0]), mean(gaps[3]); m4-m1 < 20*time.Millisecond {
		t.Errorf("mean first wait %v, mean fourth %v: want the backoff to grow (the fourth about 35 ms longer)", m1, m4)
	}
	distinct := map[time.Duration]bool{}
	for _, g := range gaps[3] {
		distinct[g.Round(time.Millisecond)] = true
	}
	if len(distinct) < calls/3 {
		t.Errorf("fourth waits take %d distinct values over %d calls: no jitter", len(distinct), calls)
	}
}

// TestRetryAfter429: a request-rate 429 is waited out (Retry-After: 1) and
// the call repeated once; a creation-limit 429 is returned at once with its
// wait, and the creation is not repeated.
func TestRetryAfter429(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t)
	var n atomic.Int32
	f.handle("GET /mailboxes/current", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			apiError(w, 429, "RATE_LIMITED", 1)
			return
		}
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	})
	start := time.Now()
	if _, err := in.Current(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took, hits := time.Since(start), len(f.hits("GET /mailboxes/current")); took < time.Second || hits != 2 {
		t.Fatalf("took %v over %d requests, want ≥ 1 s over 2", took, hits)
	}

	f.handle("POST /mailboxes", func(w http.ResponseWriter, r *http.Request) { apiError(w, 429, "CREATION_RATE_LIMITED", 42) })
	c, _ := client.New(f.base())
	start = time.Now()
	_, err := c.CreateInbox(context.Background(), 0)
	var e *client.Error
	if !errors.Is(err, client.ErrCreationLimit) || !errors.As(err, &e) || e.RetryAfter != 42*time.Second {
		t.Fatalf("CreateInbox: %v, want ErrCreationLimit with RetryAfter 42s", err)
	}
	if took, posts := time.Since(start), len(f.hits("POST /mailboxes")); took > 500*time.Millisecond || posts != 2 { // the first from f.inbox
		t.Fatalf("took %v, %d creations in all: want the refusal returned at once, not retried", took, posts)
	}
}

// TestCreationNeverRetried: a creation that times out is not sent again.
func TestCreationNeverRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	release := make(chan struct{})
	defer close(release)
	f.handle("POST /mailboxes", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c, _ := client.New(f.base(), client.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 10, BaseDelay: time.Millisecond}))
	if _, err := c.CreateInbox(context.Background(), 5*time.Minute); err == nil {
		t.Fatal("CreateInbox succeeded against a server that never answers")
	}
	time.Sleep(300 * time.Millisecond) // room for a retry, were there one
	if posts := len(f.hits("POST /mailboxes")); posts != 1 {
		t.Fatalf("%d POST /mailboxes after a timeout, want exactly 1", posts)
	}
}

// streamScript serves GET /events from a list of scripts, one per
// connection, counting open streams; each script writes to an open stream.
func (f *fake) streamScript(scripts ...func(w http.ResponseWriter, flush func())) {
	var conn atomic.Int32
	f.handle("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if f.gone.Load() {
			apiError(w, 401, "MAILBOX_SESSION_INVALID", 0)
			return
		}
		if n := f.streams.Add(1); n > f.maxStreams.Load() {
			f.maxStreams.Store(n)
		}
		defer f.streams.Add(-1)
		i := int(conn.Add(1)) - 1
		lists := len(f.hits("GET /messages"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		fl.Flush()
		// The client lists the messages once the stream is open; the
		// script starts after that list, so what it adds is news.
		for deadline := time.Now().Add(5 * time.Second); len(f.hits("GET /messages")) == lists && time.Now().Before(deadline) && r.Context().Err() == nil; {
			time.Sleep(2 * time.Millisecond)
		}
		if i < len(scripts) {
			scripts[i](w, fl.Flush)
			return
		}
		<-r.Context().Done()
	})
}

func event(m client.MessageSummary) string {
	return "event: message.received\nid: " + m.ID + "\ndata: " + summaryJSON(m) + "\n\n"
}

// TestEventsReconnect: a stream cut in the middle of an event, and one cut
// after heartbeats, are followed by a reconnect and a list that yields what
// the cuts lost, each message once, never two streams at once; the inbox's
// expiry ends the stream with ErrInboxGone.
func TestEventsReconnect(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t)
	before := f.add("before the stream") // not an event: Events yields what is new
	var a, b, d client.MessageSummary
	f.streamScript(
		func(w http.ResponseWriter, flush func()) {
			a = f.add("a")
			fmt.Fprint(w, event(a))
			b = f.add("b")
			fmt.Fprint(w, strings.Join(strings.SplitAfter(event(b), "\n")[:2], "")+`data: {"id":"`) // cut mid-event
			flush()
		},
		func(w http.ResponseWriter, flush func()) {
			fmt.Fprint(w, ": ping\n\n")
			flush()
			f.add("c") // stored, its event lost with the connection
			fmt.Fprint(w, ": ping\n\n")
			flush()
		},
		func(w http.ResponseWriter, flush func()) {
			d = f.add("d")
			fmt.Fprint(w, event(d))
			flush()
			time.Sleep(50 * time.Millisecond)
			f.gone.Store(true) // the inbox expires; the stream ends
		},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	var missed []bool
	var end error
	for ev, err := range in.Events(ctx) {
		if err != nil {
			end = err
			break
		}
		got = append(got, ev.Message.Subject)
		missed = append(missed, ev.Missed)
	}
	if !errors.Is(end, client.ErrInboxGone) || !errors.Is(end, client.ErrSessionInvalid) {
		t.Fatalf("Events ended with %v, want ErrInboxGone (and the 401 behind it)", end)
	}
	if strings.Join(got, ",") != "a,b,c,d" {
		t.Fatalf("events %v, want a,b,c,d once each (not %q)", got, before.Subject)
	}
	if missed[0] || !missed[1] || !missed[2] || missed[3] {
		t.Errorf("missed flags %v, want b and c found by the list", missed)
	}
	if n := f.maxStreams.Load(); n != 1 {
		t.Errorf("at most %d streams open at once, want 1", n)
	}
	if lists := len(f.hits("GET /messages")); lists < 3 {
		t.Errorf("%d list requests, want one after every (re)connect", lists)
	}
}

// TestOneStreamPerInbox: a second stream of the same Inbox is refused.
func TestOneStreamPerInbox(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.streamScript()
	in := f.inbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() {
		for range in.Events(ctx) {
		}
	}()
	go func() {
		for f.streams.Load() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		close(started)
	}()
	<-started
	_, err := in.WaitForMessage(ctx, client.Match{})
	if !errors.Is(err, client.ErrStreamBusy) {
		t.Fatalf("WaitForMessage during Events: %v, want ErrStreamBusy", err)
	}
	for _, err := range in.Events(ctx) {
		if !errors.Is(err, client.ErrStreamBusy) {
			t.Fatalf("second Events: %v, want ErrStreamBusy", err)
		}
		break
	}
}

// TestWaitPollsWhenStreamSilent: a stream that never answers makes
// WaitForMessage poll the list, never more often than every 5 s, until the
// message comes.
func TestWaitPollsWhenStreamSilent(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.handle("GET /events", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	in := f.inbox(t, client.WithStreamTimeouts(200*time.Millisecond, 0), client.WithPollInterval(time.Second)) // 1 s is raised to 5 s
	f.add("noise")
	go func() {
		time.Sleep(6 * time.Second)
		f.add("Your code 123")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`code \d+`)})
	if err != nil || msg.Subject != "Your code 123" || msg.TextBody != "body of Your code 123" {
		t.Fatalf("WaitForMessage: %+v, %v", msg, err)
	}
	lists := f.hits("GET /messages")
	if len(lists) < 2 {
		t.Fatalf("%d list requests, want at least two polls", len(lists))
	}
	for i := 1; i < len(lists); i++ {
		if gap := lists[i].Sub(lists[i-1]); gap < client.MinPollInterval {
			t.Errorf("poll %d came %v after the one before, want ≥ %v", i, gap, client.MinPollInterval)
		}
	}
}

// TestWaitPollsWhenStreamMute: a stream that answers 200 but never sends a
// byte, not even a heartbeat, counts as unavailable too.
func TestWaitPollsWhenStreamMute(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.handle("GET /events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	in := f.inbox(t, client.WithStreamTimeouts(time.Second, 300*time.Millisecond))
	go func() {
		time.Sleep(3 * time.Second)
		f.add("Your code 77")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`code`)})
	if err != nil || msg.Subject != "Your code 77" {
		t.Fatalf("WaitForMessage: %+v, %v", msg, err)
	}
	if streams := len(f.hits("GET /events")); streams != 2 {
		t.Errorf("%d streams opened, want 2 (then polling)", streams)
	}
	lists := f.hits("GET /messages")
	for i := 1; i < len(lists); i++ {
		if gap := lists[i].Sub(lists[i-1]); gap < client.MinPollInterval && i >= 2 { // the first two follow the two openings
			t.Errorf("poll %d came %v after the one before, want ≥ %v", i, gap, client.MinPollInterval)
		}
	}
}

// TestWaitFindsExisting: a message already there is found without waiting.
func TestWaitFindsExisting(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.streamScript()
	in := f.inbox(t)
	f.add("Welcome")
	f.add("Your code 9")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	msg, err := in.WaitForMessage(ctx, client.Match{Func: func(m client.Message) bool { return strings.HasPrefix(m.Subject, "Your code") }})
	if err != nil || msg.Subject != "Your code 9" {
		t.Fatalf("WaitForMessage: %+v, %v", msg, err)
	}
}

// TestCreationRetriesRequestRate: a request-rate 429 on POST /mailboxes was
// refused before anything was done: the creation waits it out and tries
// again; the typed creation limit is not retried (TestRetryAfter429).
func TestCreationRetriesRequestRate(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	var n atomic.Int32
	f.handle("POST /mailboxes", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			apiError(w, 429, "RATE_LIMITED", 1)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "anyprefix_" + strings.ReplaceAll(fakeID, "-", ""), Value: "scoped", Path: "/v1", HttpOnly: true})
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	})
	c, _ := client.New(f.base())
	start := time.Now()
	if _, err := c.CreateInbox(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if took, posts := time.Since(start), len(f.hits("POST /mailboxes")); took < time.Second || posts != 2 {
		t.Fatalf("took %v over %d creations, want ≥ 1 s over 2", took, posts)
	}
}

// TestRetryInsideDeadline: a retry that would outlive the caller's deadline
// is not waited for: the last error comes back at once, as ErrRateLimited.
func TestRetryInsideDeadline(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t)
	f.handle("GET /mailboxes/current", func(w http.ResponseWriter, r *http.Request) { apiError(w, 429, "RATE_LIMITED", 1) })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := in.Current(ctx)
	if !errors.Is(err, client.ErrRateLimited) || errors.Is(err, client.ErrCreationLimit) {
		t.Fatalf("Current: %v, want ErrRateLimited", err)
	}
	if took := time.Since(start); took > 200*time.Millisecond || len(f.hits("GET /mailboxes/current")) != 1 {
		t.Fatalf("took %v over %d requests: want the error at once", took, len(f.hits("GET /mailboxes/current")))
	}
}

// TestWritesNotRetriedOn500: a PATCH answered 500 may have been applied: it
// is returned, not repeated.
func TestWritesNotRetriedOn500(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t)
	f.handle("PATCH /mailboxes/current", func(w http.ResponseWriter, r *http.Request) { apiError(w, 500, "INTERNAL", 0) })
	if _, err := in.Extend(context.Background(), 5); !errors.Is(err, client.ErrInternal) {
		t.Fatalf("Extend: %v, want ErrInternal", err)
	}
	if n := len(f.hits("PATCH /mailboxes/current")); n != 1 {
		t.Fatalf("%d PATCHes, want 1", n)
	}
}

// TestRefusedConnectionRetried: while nothing listens on the service's port
// every call, creation included, backs off and tries again; it succeeds
// once the service is back.
func TestRefusedConnectionRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	addr, listen := heldPort(t)
	go func() {
		time.Sleep(700 * time.Millisecond)
		ln, err := listen()
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}()
	c, _ := client.New("http://" + addr + "/v1")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.CreateInbox(ctx, 0); err != nil {
		t.Fatalf("CreateInbox across refused connections: %v", err)
	}
	if took := time.Since(start); took < 700*time.Millisecond {
		t.Fatalf("created after %v, before the service listened", took)
	}
}

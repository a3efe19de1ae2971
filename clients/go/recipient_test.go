package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// TestAddressFor: the tag grammar is checked before any request, as the
// service would at RCPT: 1 to 64 of A-Z a-z 0-9 . _ -, local+tag at most
// 64 characters.
func TestAddressFor(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t) // abc@mayfly.test
	before := len(f.log)
	for tag, want := range map[string]string{
		"signup":                 "abc+signup@mayfly.test",
		"A.b_c-9":                "abc+A.b_c-9@mayfly.test",
		strings.Repeat("x", 60):  "abc+" + strings.Repeat("x", 60) + "@mayfly.test", // 3+1+60 = 64
		strings.Repeat("x", 61):  "",                                                // 65
		"":                       "",
		"a+b":                    "",
		"a b":                    "",
		"é":                      "",
		strings.Repeat("x", 100): "",
	} {
		got, err := in.AddressFor(tag)
		if want == "" {
			if err == nil {
				t.Errorf("AddressFor(%q) = %q; want an error", tag, got)
			}
			if _, rerr := in.Recipient(tag); rerr == nil {
				t.Errorf("Recipient(%q): no error", tag)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("AddressFor(%q) = %q, %v; want %q", tag, got, err, want)
		}
	}
	r, err := in.Recipient("Signup.1")
	if err != nil || r.Address() != "abc+signup.1@mayfly.test" || r.Tag() != "Signup.1" || r.Inbox() != in {
		t.Fatalf("Recipient: %+v, %v", r, err)
	}
	if len(f.log) != before {
		t.Errorf("AddressFor and Recipient made %d requests; want none", len(f.log)-before)
	}
}

// TestRecipientsShareOneStream: waits of several recipients at once (the
// parallel tests of one binary) share one event stream, each gets the mail
// to its own address, never another's, and a message without "to" (a
// service older than sub-addressing) is the inbox's own address's.
func TestRecipientsShareOneStream(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.streamScript() // every stream stays open, silent
	in := f.inbox(t)
	const n = 6
	var rs []*client.Recipient
	for i := range n {
		r, err := in.Recipient(fmt.Sprintf("t%d", i))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	// Mail to the last recipients comes first, with the same subject.
	for i := n - 1; i >= 0; i-- {
		f.addTo(rs[i].Address(), "Your code")
	}
	plain := f.add("Your code")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, err := r.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`code`)})
			if err != nil || msg.To != r.Address() {
				t.Errorf("recipient %d: %q, %v; want its own mail (to %s)", i, msg.To, err, r.Address())
			}
		}()
	}
	wg.Wait()
	if got := f.maxStreams.Load(); got != 1 {
		t.Errorf("%d streams at once; want the one the recipients share", got)
	}
	if got := len(f.hits("GET /messages/{id}")); got != n {
		t.Errorf("%d message reads; want %d (each wait reads only its own)", got, n)
	}
	msg, err := in.WaitForMessage(ctx, client.Match{To: "ABC@mayfly.test"})
	if err != nil || msg.ID != plain.ID || msg.To != "abc@mayfly.test" {
		t.Fatalf("the inbox's wait scoped to its own address: %+v, %v; want %s with to filled in", msg.MessageSummary, err, plain.ID)
	}
	// A scoped ExpectNoMessage is not failed by another recipient's mail.
	f.addTo(rs[1].Address(), "late")
	if err := rs[0].ExpectNoMessage(ctx, client.Match{}, 300*time.Millisecond); err != nil {
		t.Fatalf("ExpectNoMessage of recipient 0 with mail to recipient 1: %v", err)
	}
	if err := rs[1].ExpectNoMessage(ctx, client.Match{}, 300*time.Millisecond); !errors.Is(err, client.ErrUnexpectedMessage) {
		t.Fatalf("ExpectNoMessage of recipient 1 with its own mail: %v; want ErrUnexpectedMessage", err)
	}
}

// TestSharedInbox: one creation serves every recipient; each tag is the
// name made safe plus 10 random characters; an inbox that expires within 5
// minutes is extended (no creation), one whose lifetime cap is within 5
// minutes replaced (one creation, the old one deleted).
func TestSharedInbox(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.streamScript()
	var extends atomic.Int32
	f.handle("PATCH /mailboxes/current", func(w http.ResponseWriter, r *http.Request) {
		extends.Add(1)
		fmt.Fprintf(w, `{"data":{"mailbox":%s}}`, mailboxJSON())
	})
	f.handle("DELETE /mailboxes/current", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	c, _ := client.New(f.base())
	var skew atomic.Int64
	s := client.NewSharedInbox(c, client.SharedClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	ctx := context.Background()
	seen := map[string]bool{}
	tagRE := regexp.MustCompile(`^testsignup-case-1-[a-z0-9]{10}$`)
	for range 3 {
		r, err := s.Recipient(ctx, "TestSignup/case #1")
		if err != nil {
			t.Fatal(err)
		}
		if !tagRE.MatchString(r.Tag()) || seen[r.Tag()] {
			t.Errorf("tag %q: want the safe name and 10 new random characters", r.Tag())
		}
		seen[r.Tag()] = true
	}
	if s.Creations() != 1 || len(f.hits("POST /mailboxes")) != 1 || extends.Load() != 0 {
		t.Fatalf("three recipients: %d creations, %d extensions; want 1 and 0", s.Creations(), extends.Load())
	}
	long, err := s.Recipient(ctx, strings.Repeat("n", 80))
	if err != nil || len(long.Address()) > 64+len("@mayfly.test") {
		t.Fatalf("a long name: %v, %v; want it cut to fit", long, err)
	}
	skew.Store(int64(6 * time.Minute)) // expires in 4 minutes
	if _, err := s.Recipient(ctx, "x"); err != nil || extends.Load() != 1 || s.Creations() != 1 {
		t.Fatalf("expiring inbox: %v, %d extensions, %d creations; want 1 and 1", err, extends.Load(), s.Creations())
	}
	skew.Store(int64(56 * time.Minute)) // the cap in 4 minutes
	if _, err := s.Recipient(ctx, "x"); err != nil || s.Creations() != 2 || len(f.hits("DELETE /mailboxes/current")) != 1 {
		t.Fatalf("capped inbox: %v, %d creations, %d deletions; want a new one and the old deleted", err, s.Creations(), len(f.hits("DELETE /mailboxes/current")))
	}
	if err := s.Close(ctx); err != nil || len(f.hits("DELETE /mailboxes/current")) != 2 {
		t.Fatalf("Close: %v; want the inbox deleted", err)
	}
}

// TestCreationLimitExplains: a creation limit is never retried (one
// request) and its message names the window, the wait and the way out.
func TestCreationLimitExplains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code       string
		retryAfter int
		want       []string
	}{
		{"CREATION_RATE_LIMITED", 42, []string{"this IP's minute of creations", "retry in 42 s"}},
		{"CREATION_RATE_LIMITED", 3540, []string{"this IP's hour of creations", "retry in 3540 s"}},
		{"CREATION_RATE_LIMITED", 80000, []string{"this IP's day of creations", "retry in 80000 s"}},
		{"ACTIVE_INBOX_LIMIT", 0, []string{"active-inbox cap"}},
		{"GLOBAL_CREATION_LIMIT", 30, []string{"global cap", "retry in 30 s"}},
	} {
		f := newFake(t)
		f.handle("POST /mailboxes", func(w http.ResponseWriter, r *http.Request) { apiError(w, 429, tc.code, tc.retryAfter) })
		c, _ := client.New(f.base())
		_, err := c.CreateInbox(context.Background(), 0)
		if !errors.Is(err, client.ErrCreationLimit) || len(f.hits("POST /mailboxes")) != 1 {
			t.Fatalf("%s: %v after %d requests; want the creation-limit error after one", tc.code, err, len(f.hits("POST /mailboxes")))
		}
		for _, want := range append(tc.want, "a shared inbox and tagged addresses") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", tc.code, err, want)
			}
		}
	}
}

// TestStreamRetryField: after a stream that ends, the first reconnect waits
// the stream's last retry field (plus up to 250 ms of jitter), not the
// backoff (clients/SCENARIOS.md, "Retries").
func TestStreamRetryField(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.streamScript(func(w http.ResponseWriter, flush func()) {
		fmt.Fprint(w, "retry: 1500\n: heartbeat\n\n")
		flush()
	})
	in := f.inbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for _, err := range in.Events(ctx) {
		if !errors.Is(err, client.ErrWaitTimeout) {
			t.Fatalf("events: %v", err)
		}
	}
	opens := f.hits("GET /events")
	if len(opens) < 2 {
		t.Fatalf("%d streams opened; want a reconnect", len(opens))
	}
	if gap := opens[1].Sub(opens[0]); gap < 1500*time.Millisecond || gap > 2200*time.Millisecond {
		t.Fatalf("the reconnect came %v after the first open; want the stream's retry (1.5 s) and the jitter", gap)
	}
}

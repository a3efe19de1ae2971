package client_test

// The round-3 contract (clients/SCENARIOS.md) where a scripted service shows
// it better than the real one: a creation limit with Retry-After waited
// out, absence that cannot be checked, a count that falls short.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// TestWaitForCapacityRetryAfter: a creation limit with Retry-After: 1 fails
// at once by default; with WaitForCapacity it is waited out and the
// creation tried again, unless the wait would pass the caller's deadline.
func TestWaitForCapacityRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	var n atomic.Int32
	limited := func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			apiError(w, 429, "CREATION_RATE_LIMITED", 1)
			return
		}
		f.handle("POST /mailboxes", nil)
		f.serve(w, r)
	}
	c, _ := client.New(f.base())
	f.handle("POST /mailboxes", limited)
	start := time.Now()
	if _, err := c.CreateInbox(context.Background(), 0); !errors.Is(err, client.ErrCreationLimit) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("default creation: %v after %v; want ErrCreationLimit at once", err, time.Since(start))
	}
	n.Store(0)
	f.handle("POST /mailboxes", limited)
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.CreateInbox(short, 0, client.WaitForCapacity()); !errors.Is(err, client.ErrCreationLimit) {
		t.Fatalf("WaitForCapacity with 0.5 s left and Retry-After 1: %v; want the creation-limit error", err)
	}
	n.Store(0)
	f.handle("POST /mailboxes", limited)
	start = time.Now()
	in, err := c.CreateInbox(context.Background(), 0, client.WaitForCapacity())
	if err != nil || in.Mailbox().ID == "" {
		t.Fatalf("WaitForCapacity: %v", err)
	}
	if took := time.Since(start); took < time.Second || took > 3*time.Second {
		t.Fatalf("WaitForCapacity took %v; want the Retry-After (1 s) and a little", took)
	}
}

// TestExpectNoMessageUnreachable: when the service stopped answering during
// the window, nothing was checked: ExpectNoMessage fails with
// ErrUnreachable rather than succeed.
func TestExpectNoMessageUnreachable(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t, client.WithUnreachableAfter(time.Minute))
	f.srv.CloseClientConnections()
	f.srv.Close()
	holdPort(t, f.srv.Listener.Addr().String()) // refused for the whole window
	err := in.ExpectNoMessage(context.Background(), client.Match{}, time.Second)
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), f.base()) {
		t.Fatalf("ExpectNoMessage against a stopped service: %v; want ErrUnreachable naming %s", err, f.base())
	}
	// Its fields, as TypeScript's and Python's: the URL, the last error,
	// for how long.
	var ue *client.UnreachableError
	if !errors.As(err, &ue) || ue.URL != f.base() || ue.Last == nil || ue.UnreachableFor <= 0 || ue.UnreachableFor > 2*time.Second {
		t.Fatalf("ExpectNoMessage's unreachable error: %#v; want an *UnreachableError with the URL, the last error and how long", ue)
	}
}

// TestWaitForMessagesShortCount: fewer matching messages than asked for
// end in the wait-timeout error saying how many came.
func TestWaitForMessagesShortCount(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	in := f.inbox(t)
	f.add("one")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	msgs, err := in.WaitForMessages(ctx, 3, client.Match{})
	if !errors.Is(err, client.ErrWaitTimeout) || !strings.Contains(err.Error(), "1 of 3 matching messages") || msgs != nil {
		t.Fatalf("WaitForMessages(3) with one message: %v, %d; want the timeout saying 1 of 3", err, len(msgs))
	}
	// What it found is not marked seen: a later wait still returns it.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if m, err := in.WaitForMessage(ctx2, client.Match{}); err != nil || m.Subject != "one" {
		t.Fatalf("the next wait: %q, %v; want the message the short count found", m.Subject, err)
	}
}

// TestAnswerWithoutTheEnvelope: an error answer that is not the API's
// (another server, a proxy, a base URL without /v1) is named and explained
// in the words of the three clients (error-names-url).
func TestAnswerWithoutTheEnvelope(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.CreateInbox(ctx, 0)
	var e *client.Error
	want := "POST " + srv.URL + "/v1/mailboxes: 404: Not Found: not an answer of the Mayfly API (is the base URL the API's, ending in /v1?)"
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "" || !strings.Contains(err.Error(), want) {
		t.Fatalf("CreateInbox against another server's 404: %v; want %q", err, want)
	}
}

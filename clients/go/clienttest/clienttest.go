// Package clienttest is the Go client's test-runner fixture.
//
// The default is a Recipient per test (NewRecipient): a tagged address of
// one inbox the whole test binary shares, so a suite on a public service's
// limits (5 creations a minute, 10 an hour, 20 a day per IP) costs one
// creation per run. Call Close from TestMain to delete the shared inbox
// when the tests end (else it simply expires).
//
//	func TestSignup(t *testing.T) {
//		t.Parallel()
//		r := clienttest.NewRecipient(t) // $MAYFLY_URL, else http://127.0.0.1:8080/v1
//		signUp(r.Address())
//		msg, err := r.WaitForMessage(clienttest.Context(t), client.Match{Subject: regexp.MustCompile(`code`)})
//		...
//	}
//
// An inbox per test stays available (NewInbox): deleted when the test ends,
// its waits end before the test's own deadline (go test -timeout), so a
// missing mail fails with the client's explanation rather than a panic of
// the test binary.
package clienttest

import (
	"context"
	"os"
	"sync"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// TB is what the fixture needs of a test: *testing.T and *testing.B are
// ones.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// grace is what the fixture keeps of the test's deadline for the test to
// report (and for cleanups).
const grace = 2 * time.Second

// NewInbox creates an inbox on the service at $MAYFLY_URL (the API base URL,
// with /v1; else DefaultBaseURL) for t, and deletes it when t ends. A creation limit is waited
// out (client.WaitForCapacity) within the test's deadline, so parallel
// tests on the public limits wait their turn. Waits on it whose context has
// no deadline end before the test's deadline (or after 20 s). opts
// configure the client.
func NewInbox(t TB, opts ...client.Option) *client.Inbox {
	t.Helper()
	return NewInboxAt(t, BaseURL(), opts...)
}

// DefaultBaseURL is the base URL when MAYFLY_URL is unset: `make run`'s.
const DefaultBaseURL = "http://127.0.0.1:8080/v1"

// BaseURL is $MAYFLY_URL (the API base URL, with /v1), else DefaultBaseURL.
func BaseURL() string {
	if base := os.Getenv("MAYFLY_URL"); base != "" {
		return base
	}
	return DefaultBaseURL
}

// shared holds the test binary's shared inboxes, one per base URL.
var shared struct {
	mu     sync.Mutex
	byBase map[string]*client.SharedInbox
}

// NewRecipient returns a recipient for t on the test binary's shared inbox
// of the service at $MAYFLY_URL (else DefaultBaseURL): a tagged address of
// its own, made from t's name and 10 random characters, whose mail only
// its waits see. The first call creates the inbox (one creation for the
// whole binary; a creation limit fails the test with the service's
// explanation). No cleanup is needed: Close (from TestMain) deletes the
// inbox, or it expires. opts configure the shared inbox's client and only
// count at the first call. Pass Context(t) to its waits, so they end
// before the test's deadline.
func NewRecipient(t TB, opts ...client.Option) *client.Recipient {
	t.Helper()
	return NewRecipientAt(t, BaseURL(), opts...)
}

// NewRecipientAt is NewRecipient for the service at base.
func NewRecipientAt(t TB, base string, opts ...client.Option) *client.Recipient {
	t.Helper()
	shared.mu.Lock()
	s := shared.byBase[base]
	if s == nil {
		c, err := client.New(base, opts...)
		if err != nil {
			shared.mu.Unlock()
			t.Fatalf("clienttest: %v", err)
		}
		s = client.NewSharedInbox(c)
		if shared.byBase == nil {
			shared.byBase = map[string]*client.SharedInbox{}
		}
		shared.byBase[base] = s
	}
	shared.mu.Unlock()
	name := "test"
	if n, ok := t.(interface{ Name() string }); ok {
		name = n.Name()
	}
	r, err := s.Recipient(Context(t), name)
	if err != nil {
		t.Fatalf("clienttest: a recipient on the shared inbox: %v", err)
	}
	return r
}

// Shared returns the test binary's shared inbox of the service at base,
// nil before the first NewRecipientAt(base) (for its Creations or Inbox).
func Shared(base string) *client.SharedInbox {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.byBase[base]
}

// Close deletes the test binary's shared inboxes; call it from TestMain
// after m.Run.
func Close() {
	shared.mu.Lock()
	all := shared.byBase
	shared.byBase = nil
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range all {
		_ = s.Close(ctx)
	}
}

// NewInboxAt is NewInbox for the service at base.
func NewInboxAt(t TB, base string, opts ...client.Option) *client.Inbox {
	t.Helper()
	if left, ok := untilDeadline(t); ok {
		opts = append([]client.Option{client.WithDefaultTimeout(min(client.DefaultWaitTimeout, left))}, opts...)
	}
	c, err := client.New(base, opts...)
	if err != nil {
		t.Fatalf("clienttest: %v", err)
	}
	ctx := Context(t)
	in, err := c.CreateInbox(ctx, 0, client.WaitForCapacity())
	if err != nil {
		t.Fatalf("clienttest: creating an inbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := in.Delete(ctx); err != nil {
			t.Logf("clienttest: deleting the inbox %s: %v", in.Mailbox().Address, err)
		}
	})
	return in
}

// Context is a context for t's calls: it ends a little before t's deadline
// (when the test binary has one) and when t ends. (Go 1.24's t.Context()
// ends when the test does, but not before its deadline.)
func Context(t TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if left, ok := untilDeadline(t); ok {
		ctx, cancel = context.WithTimeout(context.Background(), left)
	}
	t.Cleanup(cancel)
	return ctx
}

// untilDeadline is the time t may still use before its deadline, grace
// kept back.
func untilDeadline(t TB) (time.Duration, bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return 0, false
	}
	dl, ok := d.Deadline()
	if !ok {
		return 0, false
	}
	return max(time.Until(dl)-grace, time.Second), true
}

// Package clienttest is the Go client's test-runner fixture: an inbox per
// test, deleted when the test ends, whose waits end before the test's own
// deadline (go test -timeout), so a missing mail fails with the client's
// explanation rather than a panic of the test binary.
//
//	func TestSignup(t *testing.T) {
//		inbox := clienttest.NewInbox(t) // $MAYFLY_URL, e.g. http://127.0.0.1:8080/v1
//		signUp(inbox.Mailbox().Address)
//		msg, err := inbox.WaitForMessage(clienttest.Context(t), client.Match{Subject: regexp.MustCompile(`code`)})
//		...
//	}
package clienttest

import (
	"context"
	"os"
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
// with /v1) for t, and deletes it when t ends. A creation limit is waited
// out (client.WaitForCapacity) within the test's deadline, so parallel
// tests on the public limits wait their turn. Waits on it whose context has
// no deadline end before the test's deadline (or after 20 s). opts
// configure the client.
func NewInbox(t TB, opts ...client.Option) *client.Inbox {
	t.Helper()
	base := os.Getenv("MAYFLY_URL")
	if base == "" {
		t.Fatalf("clienttest: MAYFLY_URL is not set: the API base URL, with /v1 (`make run` serves http://127.0.0.1:8080/v1)")
	}
	return NewInboxAt(t, base, opts...)
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

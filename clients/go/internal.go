package client

// The inbox's private state: one object the parts (inbox.go, transport.go,
// events.go, wait.go, recipient.go, shared.go) share, and its methods.

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// inboxState is the inbox's private state. Inbox embeds it; the event
// stream, the waits, the recipients and the shared inbox's hub work on it
// through the methods below and transport.go's call.
type inboxState struct {
	c         *Client
	jar       *jar
	hc        *http.Client
	mailbox   atomic.Pointer[Mailbox]
	streaming atomic.Bool
	// goneErr is set once the inbox is known gone (deleted by this Inbox,
	// or its session refused): every method returns it from then on.
	goneErr atomic.Pointer[gone]

	mu       sync.Mutex
	returned map[string]bool // messages returned by a wait or Message: "unseen" skips them
	order    []string        // returned, oldest first (bounded by maxReturned)
	// failing is when the current run of transport failures (no HTTP
	// answer) began; zero once anything answered. lastFail is the last.
	failing  time.Time
	lastFail error

	// hubMu guards hub: the one event stream that serves the waits of the
	// inbox's recipients (recipient.go).
	hubMu sync.Mutex
	hub   *hub
}

// box is the mailbox as last seen.
func (in *inboxState) box() Mailbox {
	if m := in.mailbox.Load(); m != nil {
		return *m
	}
	return Mailbox{}
}

// goneError is the ErrInboxGone error once the inbox is known gone, else
// nil.
func (in *inboxState) goneError() error {
	if g := in.goneErr.Load(); g != nil {
		return *g
	}
	return nil
}

// fillTo gives a summary of a service older than sub-addressing (no to)
// the inbox's address.
func (in *inboxState) fillTo(s *MessageSummary) {
	if s.To == "" {
		s.To = strings.ToLower(in.box().Address)
	}
}

// noteTransport records the outcome of one attempt: err nil means an HTTP
// answer came (whatever its status).
func (in *inboxState) noteTransport(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err == nil {
		in.failing, in.lastFail = time.Time{}, nil
		return
	}
	if in.failing.IsZero() {
		in.failing = time.Now()
	}
	in.lastFail = err
}

// downSince is when the current run of transport failures began (zero:
// the last attempt had an answer) and its last error.
func (in *inboxState) downSince() (time.Time, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.failing, in.lastFail
}

// maxReturned bounds the ids an Inbox remembers as returned: a mailbox keeps
// at most 100 messages.
const maxReturned = 500

func (c *Client) newInbox() *Inbox {
	j := newJar(c.base)
	return &Inbox{&inboxState{c: c, jar: j, returned: map[string]bool{}, hc: &http.Client{
		Transport: c.transport, Jar: j, Timeout: c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}}
}

// markReturned remembers that id was handed to the caller.
func (in *inboxState) markReturned(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if id == "" || in.returned[id] {
		return
	}
	in.returned[id] = true
	in.order = append(in.order, id)
	if len(in.order) > maxReturned {
		delete(in.returned, in.order[0])
		in.order = in.order[1:]
	}
}

func (in *inboxState) wasReturned(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.returned[id]
}

// markGone returns the inbox's gone error, recording err as its cause when
// the inbox was not yet known gone.
func (in *inboxState) markGone(err error) error {
	if g := in.goneError(); g != nil {
		return g
	}
	in.goneErr.CompareAndSwap(nil, &gone{err: err})
	return in.goneError()
}

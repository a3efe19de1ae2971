package client

// The shared inbox (SharedInbox) and the hub: the one event stream of an
// inbox that its recipients' waits share, with a reader that reads every
// message once for a shared inbox.

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"
)

// hub follows an inbox's one event stream (the API allows one per inbox)
// for all the waits of its recipients: each wait reads the messages the
// hub has heard of, and only reads the bodies of those to its address.
type hub struct {
	in *Inbox

	mu      sync.Mutex
	events  []Event // every message heard of, in the order heard (oldest first)
	primed  bool    // the first list is in
	err     error   // why the hub stopped (the inbox gone), once it has
	changed chan struct{}
	refs    int // waits, event loops and shared inboxes holding the hub

	// prefetch (a shared inbox's hub): one reader reads every message as
	// it is heard of, in order, so the waits of many parallel tests make
	// no request of their own and no read falls behind the service's
	// request rate. bodies holds what it read, tried what it tried.
	prefetch bool
	bodies   map[string]Message
	tried    map[string]bool
	order    []string // bodies' ids, oldest first (bounded by maxBodies)
	queue    []string // ids heard of, not yet read
	queued   chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

// acquireHub returns the inbox's running hub, starting it when none runs;
// releaseHub gives it back. The hub holds the inbox's stream: a wait of the
// Inbox itself meets ErrStreamBusy meanwhile.
func (in *Inbox) acquireHub() (*hub, error) { return in.acquireHubWith(false) }

// acquireHubWith is acquireHub; a hub it starts prefetches when asked.
func (in *Inbox) acquireHubWith(prefetch bool) (*hub, error) {
	if err := in.Gone(); err != nil {
		return nil, err
	}
	in.hubMu.Lock()
	defer in.hubMu.Unlock()
	if h := in.hub; h != nil {
		select {
		case <-h.done:
		default:
			h.mu.Lock()
			h.refs++
			h.mu.Unlock()
			return h, nil
		}
	}
	if !in.streaming.CompareAndSwap(false, true) {
		return nil, ErrStreamBusy
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{in: in, changed: make(chan struct{}), refs: 1, cancel: cancel, done: make(chan struct{}),
		prefetch: prefetch, bodies: map[string]Message{}, tried: map[string]bool{}, queued: make(chan struct{}, 1)}
	in.hub = h
	go h.run(ctx)
	return h, nil
}

func (in *Inbox) releaseHub(h *hub) {
	in.hubMu.Lock()
	defer in.hubMu.Unlock()
	h.mu.Lock()
	h.refs--
	last := h.refs == 0
	h.mu.Unlock()
	if !last {
		return
	}
	h.cancel()
	<-h.done
	if in.hub == h {
		in.hub = nil
	}
}

// run follows the stream (or polls the list when the stream cannot be
// opened) until the hub is released or the inbox is gone.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	defer h.in.streaming.Store(false)
	if h.prefetch {
		fetched := make(chan struct{})
		defer func() { <-fetched }()
		go func() {
			defer close(fetched)
			h.fetch(ctx)
		}()
	}
	f := follower{in: h.in, seen: map[string]bool{}, fallback: true, listed: h.listed}
	emit := func(ev Event) bool {
		h.mu.Lock()
		h.events = append(h.events, ev)
		if h.prefetch {
			h.queue = append(h.queue, ev.Message.ID)
			select {
			case h.queued <- struct{}{}:
			default:
			}
		}
		h.notify()
		h.mu.Unlock()
		return true
	}
	for ctx.Err() == nil {
		err := f.run(ctx, true, emit)
		var oe errOpen
		if errors.As(err, &oe) {
			h.in.c.log.Info("mayfly: event stream unavailable; polling the message list", "every", h.in.c.poll, "err", err)
			err = f.poll(ctx, emit)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !transient(err) {
			h.mu.Lock()
			h.err = err
			if isGone(err) {
				h.err = h.in.markGone(err)
			}
			h.notify()
			h.mu.Unlock()
			return
		}
		if sleep(ctx, RetryPolicy{}.withDefaults().backoff(3)) != nil {
			return
		}
	}
}

// maxBodies bounds the messages a prefetching hub keeps read.
const maxBodies = 1000

// fetch is the prefetching hub's reader: it reads the messages heard of,
// one at a time, oldest first. A message it cannot read (still pending,
// gone, an error past the retries) is left to the wait that wants it.
func (h *hub) fetch(ctx context.Context) {
	for {
		h.mu.Lock()
		var id string
		if len(h.queue) > 0 {
			id, h.queue = h.queue[0], h.queue[1:]
		}
		h.mu.Unlock()
		if id == "" {
			select {
			case <-ctx.Done():
				return
			case <-h.queued:
				continue
			}
		}
		var out struct {
			Message Message `json:"message"`
		}
		err := h.in.call(ctx, "GET", "/messages/"+url.PathEscape(id), nil, kindRead, &out)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		h.tried[id] = true
		if err == nil && out.Message.Status != StatusPending {
			h.in.fillTo(&out.Message.MessageSummary)
			h.bodies[id] = out.Message
			h.order = append(h.order, id)
			if len(h.order) > maxBodies {
				delete(h.bodies, h.order[0])
				h.order = h.order[1:]
			}
		} else if err != nil {
			h.in.c.log.Info("mayfly: reading a message of the shared inbox; its wait reads it again", "id", id, "err", err)
		}
		h.notify()
		h.mu.Unlock()
	}
}

// body is the message read by the prefetching hub: ok when it is there;
// wait when the reader has not tried it yet (the caller waits for a
// change rather than read it itself).
func (h *hub) body(id string) (msg Message, ok, wait bool) {
	if !h.prefetch {
		return Message{}, false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	msg, ok = h.bodies[id]
	return msg, ok, !ok && !h.tried[id]
}

// listed marks the hub primed once a list of the inbox is in.
func (h *hub) listed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.primed {
		h.primed = true
		h.notify()
	}
}

// notify wakes the waits; the caller holds mu.
func (h *hub) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// snapshot is the events heard so far (not to be changed), whether the
// first list is in, a channel closed at the next change and the hub's end.
func (h *hub) snapshot() ([]Event, bool, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events[:len(h.events):len(h.events)], h.primed, h.changed, h.err
}

// SharedInbox is one inbox shared by many tests, each with a tagged
// address of its own (a Recipient): a test suite on a public service's
// limits (5 creations a minute, 10 an hour, 20 a day per IP) costs one
// creation, not one a test. It is safe for concurrent use; its recipients
// wait side by side on one event stream.
type SharedInbox struct {
	c    *Client
	opts sharedOptions

	mu        sync.Mutex
	in        *Inbox
	hub       *hub // held while the inbox is, so the waits share one stream
	creations int
}

// SharedOption configures a SharedInbox.
type SharedOption func(*sharedOptions)

type sharedOptions struct {
	lifetime time.Duration
	create   []CreateOption
	now      func() time.Time
}

// SharedLifetime is the lifetime the inbox is created with (whole minutes,
// 1 to 10; default 10).
func SharedLifetime(d time.Duration) SharedOption {
	return func(o *sharedOptions) { o.lifetime = d }
}

// SharedCreateOptions are the options of the inbox's creation (e.g.
// WaitForCapacity()).
func SharedCreateOptions(opts ...CreateOption) SharedOption {
	return func(o *sharedOptions) { o.create = append(o.create, opts...) }
}

// SharedClock sets the clock the expiry checks read (default time.Now).
func SharedClock(now func() time.Time) SharedOption {
	return func(o *sharedOptions) { o.now = now }
}

// sharedMargin: an inbox that expires within it is extended, one whose
// lifetime cap is within it is replaced.
const sharedMargin = 5 * time.Minute

// NewSharedInbox returns a shared inbox of c; the inbox is created at the
// first Recipient.
func NewSharedInbox(c *Client, opts ...SharedOption) *SharedInbox {
	o := sharedOptions{lifetime: 10 * time.Minute, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return &SharedInbox{c: c, opts: o}
}

// Recipient hands out a new recipient: a tagged address of the shared
// inbox whose tag is name made safe (lower case, every run of characters
// other than a-z 0-9 one "-") plus "-" and 10 random characters, never
// the same twice. The first call creates the inbox (a creation limit is
// returned as it is, never retried unless SharedCreateOptions asks
// WaitForCapacity). Before each hand-out an inbox that expires within 5
// minutes is extended, and one whose 60-minute cap (MaxExpiresAt) is within
// 5 minutes is replaced by a new one (the old one is deleted).
func (s *SharedInbox) Recipient(ctx context.Context, name string) (*Recipient, error) {
	in, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	local, _, _ := strings.Cut(in.Mailbox().Address, "@")
	return in.Recipient(sharedTag(name, maxLocal-len(local)-1))
}

// Inbox is the inbox recipients are handed out of (nil before the first
// Recipient).
func (s *SharedInbox) Inbox() *Inbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}

// Creations is how many inboxes the shared inbox has created.
func (s *SharedInbox) Creations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creations
}

// Close deletes the inbox (an inbox already gone is no error).
func (s *SharedInbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in == nil {
		return nil
	}
	s.drop()
	err := s.in.Delete(ctx)
	s.in = nil
	return err
}

// drop releases the hub of the current inbox; the caller holds mu.
func (s *SharedInbox) drop() {
	if s.hub != nil {
		s.in.releaseHub(s.hub)
		s.hub = nil
	}
}

// current is the inbox to hand a recipient out of: created, extended or
// replaced as Recipient says.
func (s *SharedInbox) current(ctx context.Context) (*Inbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in != nil && s.in.Gone() == nil {
		mb, now := s.in.Mailbox(), s.opts.now()
		switch {
		case !mb.MaxExpiresAt.IsZero() && mb.MaxExpiresAt.Sub(now) < sharedMargin:
			old := s.in
			if err := s.create(ctx); err != nil {
				return nil, err
			}
			if err := old.Delete(ctx); err != nil {
				s.c.log.Info("mayfly: deleting the replaced shared inbox", "err", err)
			}
			return s.in, nil
		case !mb.ExpiresAt.IsZero() && mb.ExpiresAt.Sub(now) < sharedMargin:
			if _, err := s.in.Extend(ctx, 10); err != nil && s.in.Gone() == nil {
				// It still lives for minutes: hand out, try again next time.
				s.c.log.Info("mayfly: extending the shared inbox", "err", err)
			}
		}
		if s.in.Gone() == nil {
			return s.in, nil
		}
	}
	if err := s.create(ctx); err != nil {
		return nil, err
	}
	return s.in, nil
}

// create makes the new inbox and takes its hub; the caller holds mu.
func (s *SharedInbox) create(ctx context.Context) error {
	in, err := s.c.CreateInbox(ctx, s.opts.lifetime, s.opts.create...)
	if err != nil {
		return err
	}
	s.creations++
	if s.in != nil {
		s.drop()
	}
	s.in = in
	if h, err := in.acquireHubWith(true); err == nil {
		s.hub = h
	}
	return nil
}

const tagAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// sharedTag is name made safe and cut so that the tag fits in room
// characters, then "-" and 10 random characters of a-z 0-9.
func sharedTag(name string, room int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	safe := strings.Trim(b.String(), "-")
	suffix := make([]byte, 10)
	for i := range suffix {
		suffix[i] = tagAlphabet[rand.N(len(tagAlphabet))]
	}
	room = min(room, maxLocal) - len(suffix) - 1
	if len(safe) > room {
		safe = strings.TrimRight(safe[:max(room, 0)], "-")
	}
	if safe == "" {
		return string(suffix)
	}
	return safe + "-" + string(suffix)
}

package client

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

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

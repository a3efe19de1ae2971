package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"time"
)

// Tagged addresses (RFC 5233 sub-addressing): the service delivers mail for
// <local>+<tag>@<domain> into the inbox of <local>@<domain>, and every
// message carries the recipient it arrived for (MessageSummary.To).

// tagGrammarRE is a tag the service accepts: 1 to 64 of A-Z a-z 0-9 . _ -.
var tagGrammarRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// maxLocal is the longest local part (local+tag) of an address.
const maxLocal = 64

// AddressFor returns the inbox's address tagged with tag,
// <local>+<tag>@<domain>. It makes no request. A tag is 1 to 64 of
// A-Z a-z 0-9 . _ - and local+tag is at most 64 characters; anything else
// is an error, as the service would refuse it at RCPT.
func (in *Inbox) AddressFor(tag string) (string, error) {
	addr := in.Mailbox().Address
	local, domain, ok := strings.Cut(addr, "@")
	if !ok {
		return "", fmt.Errorf("mayfly: address for tag %q: the inbox has no address", tag)
	}
	if !tagGrammarRE.MatchString(tag) {
		return "", fmt.Errorf("mayfly: tag %q: want 1 to 64 of A-Z a-z 0-9 . _ -", tag)
	}
	if n := len(local) + 1 + len(tag); n > maxLocal {
		return "", fmt.Errorf("mayfly: tag %q: %s+%s is %d characters, over the %d of a local part", tag, local, tag, n, maxLocal)
	}
	return local + "+" + tag + "@" + domain, nil
}

// Recipient is one tagged address of an inbox: its waits, ExpectNoMessage
// and Events see only the mail sent to that address. Recipients of one
// inbox wait side by side (from parallel tests) on one event stream of the
// inbox, which they share.
type Recipient struct {
	in      *Inbox
	tag     string
	address string
}

// Recipient returns the recipient of the inbox's address tagged with tag
// (see AddressFor for what a tag may be). It makes no request.
func (in *Inbox) Recipient(tag string) (*Recipient, error) {
	addr, err := in.AddressFor(tag)
	if err != nil {
		return nil, err
	}
	return &Recipient{in: in, tag: tag, address: strings.ToLower(addr)}, nil
}

// Address is the recipient's address, <local>+<tag>@<domain>, lower-cased
// as the service records it in a message's To.
func (r *Recipient) Address() string { return r.address }

// Tag is the recipient's tag.
func (r *Recipient) Tag() string { return r.tag }

// Inbox is the inbox the recipient's mail lands in.
func (r *Recipient) Inbox() *Inbox { return r.in }

func (r *Recipient) scoped(m Match) Match {
	m.To = r.address
	return m
}

// WaitForMessage is Inbox.WaitForMessage scoped to the recipient: it never
// returns another recipient's message. "Unseen" is per scope: the messages
// to this address the Inbox has not returned.
func (r *Recipient) WaitForMessage(ctx context.Context, m Match) (Message, error) {
	msgs, err := r.waitFor(ctx, 1, r.scoped(m))
	if err != nil {
		return Message{}, err
	}
	return msgs[0], nil
}

// WaitForMessages is Inbox.WaitForMessages scoped to the recipient.
func (r *Recipient) WaitForMessages(ctx context.Context, n int, m Match) ([]Message, error) {
	if n < 1 {
		return nil, fmt.Errorf("mayfly: wait for %d messages: want 1 or more", n)
	}
	return r.waitFor(ctx, n, r.scoped(m))
}

// ExpectNoMessage is Inbox.ExpectNoMessage scoped to the recipient: mail
// to other addresses of the inbox does not fail it.
func (r *Recipient) ExpectNoMessage(ctx context.Context, m Match, within time.Duration) error {
	return r.in.expectNo(ctx, r.scoped(m), within, r.waitFor)
}

func (r *Recipient) waitFor(ctx context.Context, n int, m Match) ([]Message, error) {
	h, err := r.in.acquireHub()
	if err != nil {
		return nil, err
	}
	defer r.in.releaseHub(h)
	return r.in.waitWith(ctx, n, m, h.wait)
}

// Events is Inbox.Events scoped to the recipient: it yields the messages
// to its address that arrive from now on, until ctx's deadline (the 20 s
// default when none) with the wait-timeout error.
func (r *Recipient) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		h, err := r.in.acquireHub()
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer r.in.releaseHub(h)
		ctx, cancel := r.in.c.waitContext(ctx)
		defer cancel()
		next := -1 // the first event not yet looked at; -1 until the hub has listed
		for {
			evs, primed, changed, herr := h.snapshot()
			if herr != nil {
				yield(Event{}, herr)
				return
			}
			if primed && next < 0 {
				next = len(evs) // what is there now is not new
			}
			for ; next >= 0 && next < len(evs); next++ {
				if ev := evs[next]; strings.EqualFold(ev.Message.To, r.address) && !yield(ev, nil) {
					return
				}
			}
			select {
			case <-ctx.Done():
				err := ctx.Err()
				if errors.Is(err, context.DeadlineExceeded) {
					err = waitTimeout{events: true}
				}
				yield(Event{}, err)
				return
			case <-changed:
			}
		}
	}
}

// wait is a recipient's wait loop over the hub's messages (waitInner).
func (h *hub) wait(ctx context.Context, n int, m Match, st *waitStats) ([]Message, error) {
	in := h.in
	var found []Message
	checked := map[string]bool{}
	var excluded map[string]bool // since now or a message: what was there (nil until primed)
	for {
		evs, primed, changed, herr := h.snapshot()
		if herr != nil {
			return found, herr
		}
		if primed && excluded == nil {
			excluded = map[string]bool{}
			if k := m.Since.kind; k == sinceNow || k == sinceMessage {
				at := -1
				for i, ev := range evs {
					if ev.Message.ID == m.Since.id {
						at = i
					}
				}
				if k == sinceMessage && at < 0 {
					return nil, errSinceNotFound(in, m.Since.id)
				}
				if k == sinceNow {
					at = len(evs) - 1
				}
				for _, ev := range evs[:at+1] {
					excluded[ev.Message.ID] = true
				}
			}
		}
		retry := false
		for _, ev := range evs {
			if excluded == nil {
				break
			}
			s := ev.Message
			if checked[s.ID] {
				continue
			}
			checked[s.ID] = true
			if excluded[s.ID] || !m.inScope(s) || m.Since.kind == sinceUnseen && in.wasReturned(s.ID) ||
				m.Since.kind == sinceTime && !s.ReceivedAt.After(m.Since.t) {
				continue
			}
			if !m.summaryMatches(s) {
				st.missed(s.Subject)
				continue
			}
			msg, ok, later := h.body(s.ID)
			if later {
				delete(checked, s.ID) // the reader has not come to it yet
				continue
			}
			var err error
			if !ok {
				msg, err = in.readReady(ctx, s.ID)
			}
			switch {
			case errors.Is(err, ErrMessageNotFound):
				in.c.log.Info("mayfly: a message heard of is not found (deleted, or evicted: the inbox keeps its newest 100)", "id", s.ID)
				continue
			case ctx.Err() != nil:
				return found, ctx.Err()
			case isGone(err):
				return found, in.markGone(err)
			case err != nil && !transient(err):
				return found, err
			case err != nil:
				st.last = err
				delete(checked, s.ID) // look at it again
				retry = true
			}
			if retry {
				break
			}
			if !m.messageMatches(msg) {
				st.missed(s.Subject)
				continue
			}
			found = append(found, msg)
			if len(found) == n {
				for _, msg := range found {
					in.markReturned(msg.ID)
				}
				return found, nil
			}
		}
		if retry {
			if err := sleep(ctx, RetryPolicy{}.withDefaults().backoff(3)+100*time.Millisecond); err != nil {
				return found, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return found, ctx.Err()
		case <-changed:
		}
	}
}

package client

// Waits and matchers: WaitForMessage, WaitForMessages and ExpectNoMessage
// over the event stream (events.go), Match and Since.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Match selects messages for WaitForMessage; every condition set must hold,
// and the zero Match takes any message that is new in the sense of Since
// (by default: not yet returned by this Inbox).
type Match struct {
	Subject *regexp.Regexp // on the subject
	From    *regexp.Regexp // on the sender ("Name <address>", as the API shows it)
	Text    *regexp.Regexp // on text_body (the message is read to test it)
	Func    func(Message) bool
	// To scopes the wait to one recipient: only messages to this address
	// (compared without regard to case; a tagged address of the inbox, or
	// its own) are looked at. A scoped wait never returns another
	// recipient's message, and messages to others do not count as
	// arrived in its timeout's text.
	To string
	// Since says which messages are new; the zero value is SinceUnseen.
	Since Since
}

// Since says which messages a wait may return.
type Since struct {
	kind sinceKind
	id   string
	t    time.Time
}

type sinceKind int

const (
	sinceUnseen sinceKind = iota
	sinceNow
	sinceMessage
	sinceTime
)

// SinceUnseen (the default) takes the messages this Inbox has not already
// returned from a wait or from Message: a "resend code" test calls the same
// wait twice and gets the second code. It counts what this Inbox object
// returned (and what its State carried), not what other clients read.
var SinceUnseen = Since{}

// SinceNow takes the messages that were not in the inbox when the wait
// started (it lists the inbox once at the start; no clock is compared).
func SinceNow() Since { return Since{kind: sinceNow} }

// SinceMessage takes the messages received after the message id (in the
// list's order, newest first). The message must still be in the inbox.
func SinceMessage(id string) Since { return Since{kind: sinceMessage, id: id} }

// SinceTime takes the messages whose received_at (the service's clock) is
// strictly after t.
func SinceTime(t time.Time) Since { return Since{kind: sinceTime, t: t} }

// String is the CLI's spelling of s: unseen, now, the id or the time.
func (s Since) String() string {
	switch s.kind {
	case sinceNow:
		return "now"
	case sinceMessage:
		return s.id
	case sinceTime:
		return s.t.Format(time.RFC3339Nano)
	}
	return "unseen"
}

// ParseSince reads the CLI's spelling: "unseen", "now", a message id or an
// RFC 3339 time.
func ParseSince(v string) (Since, error) {
	switch {
	case v == "" || v == "unseen":
		return SinceUnseen, nil
	case v == "now":
		return SinceNow(), nil
	case uuidRE.MatchString(v):
		return SinceMessage(strings.ToLower(v)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return SinceTime(t), nil
	}
	return Since{}, fmt.Errorf("mayfly: since %q: want unseen, now, a message id or an RFC 3339 time", v)
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// inScope reports whether s is to the wait's recipient (any, when To is
// unset).
func (m Match) inScope(s MessageSummary) bool {
	return m.To == "" || strings.EqualFold(s.To, m.To)
}

func (m Match) summaryMatches(s MessageSummary) bool {
	return (m.Subject == nil || m.Subject.MatchString(s.Subject)) &&
		(m.From == nil || m.From.MatchString(s.From))
}

func (m Match) messageMatches(msg Message) bool {
	return (m.Text == nil || m.Text.MatchString(msg.TextBody)) && (m.Func == nil || m.Func(msg))
}

// WaitForMessage returns the first message that matches m and is new in the
// sense of m.Since (by default: not yet returned by this Inbox), with its
// bodies and its status, "ready" or "failed" (a message the service could
// not parse is returned too). Among several, the oldest. It follows the
// event stream and lists the messages after every (re)connect; when the
// stream cannot be opened twice in a row it polls the message list every
// poll interval (5 s or more). It keeps going across node restarts,
// refused connections, 503s and 429s until ctx's deadline
// (DefaultWaitTimeout, 20 s, when ctx has none), then fails with an error
// matching ErrWaitTimeout and context.DeadlineExceeded whose text says why
// (the messages that arrived and did not match, or that none did, or the
// last error). When no attempt has had an HTTP answer for the unreachable
// window (10 s) it fails early with ErrUnreachable. A cancelled ctx ends it
// with context.Canceled; a gone inbox with ErrInboxGone; m.Since naming a
// message not in the inbox with ErrMessageNotFound (an *Error).
func (in *Inbox) WaitForMessage(ctx context.Context, m Match) (Message, error) {
	msgs, err := in.waitFor(ctx, 1, m)
	if err != nil {
		return Message{}, err
	}
	return msgs[0], nil
}

// WaitForMessages returns n messages that match m and are new in the sense
// of m.Since, oldest first, and marks them seen; it waits as WaitForMessage
// does, and its timeout error says how many of n it had.
func (in *Inbox) WaitForMessages(ctx context.Context, n int, m Match) ([]Message, error) {
	if n < 1 {
		return nil, fmt.Errorf("mayfly: wait for %d messages: want 1 or more", n)
	}
	return in.waitFor(ctx, n, m)
}

// ExpectNoMessage succeeds when no message that matches m (and is new in
// the sense of m.Since) arrives within the window; when one does, it fails
// at once with an *UnexpectedMessageError (ErrUnexpectedMessage) carrying
// it. The honest way to assert "no second email". A ctx deadline shorter
// than within ends it with the wait-timeout error; a service that did not
// answer at the window's end (every attempt failing) with ErrUnreachable,
// since then nothing was checked.
func (in *Inbox) ExpectNoMessage(ctx context.Context, m Match, within time.Duration) error {
	return in.expectNo(ctx, m, within, in.waitFor)
}

// expectNo is ExpectNoMessage over a wait (the inbox's, or a recipient's).
func (in *Inbox) expectNo(ctx context.Context, m Match, within time.Duration,
	wait func(context.Context, int, Match) ([]Message, error)) error {
	start := time.Now()
	wctx, cancel := context.WithTimeoutCause(ctx, within, errWindowEnded)
	defer cancel()
	msgs, err := wait(wctx, 1, m)
	switch {
	case err == nil:
		return &UnexpectedMessageError{Received: msgs[0]}
	case errors.Is(context.Cause(wctx), errWindowEnded) && errors.Is(err, ErrWaitTimeout) && ctx.Err() == nil:
		if failing, last := in.downSince(); !failing.IsZero() && failing.After(start) {
			return &UnreachableError{URL: in.c.base.String(), Last: last, UnreachableFor: time.Since(failing)}
		}
		return nil
	}
	return err
}

var errWindowEnded = errors.New("the window ended")

// waitFor runs a wait for n messages: the default deadline, the stream
// lock, the unreachable watchdog, and the errors that explain a timeout.
func (in *Inbox) waitFor(ctx context.Context, n int, m Match) ([]Message, error) {
	if err := in.Gone(); err != nil {
		return nil, err
	}
	if !in.streaming.CompareAndSwap(false, true) {
		return nil, ErrStreamBusy
	}
	defer in.streaming.Store(false)
	return in.waitWith(ctx, n, m, in.wait)
}

// waitInner is the loop of a wait: the inbox's own stream (Inbox.wait) or
// the recipients' shared one (hub.wait).
type waitInner func(ctx context.Context, n int, m Match, st *waitStats) ([]Message, error)

// waitWith runs inner with the default deadline, the unreachable watchdog
// and the errors that explain a timeout.
func (in *Inbox) waitWith(ctx context.Context, n int, m Match, inner waitInner) ([]Message, error) {
	ctx, cancel := in.c.waitContext(ctx)
	defer cancel()
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	start := time.Now()
	if in.c.unreachable > 0 {
		go in.watch(wctx, start, stop)
	}
	var st waitStats
	msgs, err := inner(wctx, n, m, &st)
	if err == nil {
		return msgs, nil
	}
	if u, ok := context.Cause(wctx).(*UnreachableError); ok {
		return nil, u
	}
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		w := waitTimeout{last: st.last, arrived: st.arrived, first: st.first, want: n, got: len(msgs)}
		if failing, _ := in.downSince(); !failing.IsZero() {
			w.down = time.Since(later(failing, start))
		}
		return nil, w
	}
	return nil, err
}

// watch cancels a wait with the unreachable error once no attempt made
// since start has had an HTTP answer for the unreachable window.
func (in *Inbox) watch(ctx context.Context, start time.Time, stop context.CancelCauseFunc) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		failing, last := in.downSince()
		if failing.IsZero() {
			continue
		}
		if down := time.Since(later(failing, start)); down >= in.c.unreachable {
			stop(&UnreachableError{URL: in.c.base.String(), Last: last, UnreachableFor: down})
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waitStats is what a wait saw, for its timeout's text.
type waitStats struct {
	last    error  // the last transient error passed over
	arrived int    // new messages that did not match
	first   string // the first one's subject
}

// missed counts a new message that did not match.
func (st *waitStats) missed(subject string) {
	st.arrived++
	if st.arrived == 1 {
		st.first = subject
	}
}

// wait is waitFor's loop: it returns the messages found (fewer than n with
// the error that ended it).
func (in *Inbox) wait(ctx context.Context, n int, m Match, st *waitStats) ([]Message, error) {
	f := follower{in: in, seen: map[string]bool{}, fallback: true}
	defer func() { st.last = f.last }()
	excluded := map[string]bool{}
	if k := m.Since.kind; k == sinceNow || k == sinceMessage {
		// One list at the start, retried across outages like the wait.
		var all []MessageSummary
		for {
			all = all[:0]
			var err error
			for s, e := range in.All(ctx, 100) {
				if err = e; e != nil {
					break
				}
				all = append(all, s)
			}
			if err == nil {
				break
			}
			if isGone(err) {
				return nil, in.markGone(err)
			}
			if !transient(err) {
				return nil, err
			}
			f.last = err
			if serr := sleep(ctx, RetryPolicy{}.withDefaults().backoff(2)+100*time.Millisecond); serr != nil {
				return nil, serr
			}
		}
		found := k == sinceNow
		for _, s := range all { // newest first
			if s.ID == m.Since.id {
				found = true
			}
			if found {
				excluded[s.ID] = true
			}
		}
		if !found {
			return nil, errSinceNotFound(in, m.Since.id)
		}
	}
	var found []Message
	var pickErr error
	var pickID string
	missed := func(subject string) bool {
		st.missed(subject)
		return true
	}
	pick := func(ev Event) bool {
		s := ev.Message
		if excluded[s.ID] || !m.inScope(s) || m.Since.kind == sinceUnseen && in.wasReturned(s.ID) ||
			m.Since.kind == sinceTime && !s.ReceivedAt.After(m.Since.t) {
			return true // not new
		}
		if !m.summaryMatches(s) {
			return missed(s.Subject)
		}
		msg, err := in.readReady(ctx, s.ID)
		if err != nil {
			if errors.Is(err, ErrMessageNotFound) {
				return true // deleted meanwhile
			}
			pickErr, pickID = err, s.ID
			return false
		}
		if !m.messageMatches(msg) {
			return missed(s.Subject)
		}
		found = append(found, msg)
		return len(found) < n
	}
	var err error
	for {
		err = f.run(ctx, true, pick)
		var oe errOpen
		if errors.As(err, &oe) {
			in.c.log.Info("mayfly: event stream unavailable; polling the message list", "every", in.c.poll, "err", err)
			err = f.poll(ctx, pick)
		}
		if pickErr == nil {
			break
		}
		if isGone(pickErr) {
			return found, in.markGone(pickErr)
		}
		if !transient(pickErr) {
			return found, pickErr
		}
		// Reading the message failed (an outage): look at it again.
		delete(f.seen, pickID)
		f.last, pickErr = pickErr, nil
		if serr := sleep(ctx, RetryPolicy{}.withDefaults().backoff(3)+100*time.Millisecond); serr != nil {
			return found, serr
		}
	}
	if len(found) < n {
		if err == nil {
			err = ctx.Err()
		}
		return found, err
	}
	for _, msg := range found {
		in.markReturned(msg.ID)
	}
	return found, nil
}

// readReady reads a message, and again every poll interval while it is
// pending (it has no body yet).
func (in *Inbox) readReady(ctx context.Context, id string) (Message, error) {
	for {
		var out struct {
			Message Message `json:"message"`
		}
		err := in.call(ctx, http.MethodGet, "/messages/"+url.PathEscape(id), nil, kindRead, &out)
		in.fillTo(&out.Message.MessageSummary)
		if err != nil || out.Message.Status != StatusPending {
			return out.Message, err
		}
		if err := sleep(ctx, in.c.poll); err != nil {
			return Message{}, err
		}
	}
}

// errSinceNotFound is a wait's since naming a message not in the inbox.
func errSinceNotFound(in *Inbox, id string) error {
	return &Error{Method: "GET", URL: in.c.base.String() + "/messages", Status: 404,
		Code: "MESSAGE_NOT_FOUND", Message: "wait since message " + id + ": no such message in the inbox"}
}

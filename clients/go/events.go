package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Event is one event of an inbox's stream.
type Event struct {
	// Type is "message.received" for a new message (the one event the API
	// defines); Message is its summary. Events of other types are not
	// yielded.
	Type    string
	Message MessageSummary
	// Missed is set for a message found by the list after a reconnect,
	// rather than announced by the stream.
	Missed bool
}

// EventMessageReceived is the type of a new-message event.
const EventMessageReceived = "message.received"

// errOpen marks a stream that could not be opened (as opposed to one that
// opened and then ended).
type errOpen struct{ err error }

func (e errOpen) Error() string { return "mayfly: opening the event stream: " + e.err.Error() }
func (e errOpen) Unwrap() error { return e.err }

// Events yields the inbox's new messages as they arrive, from GET /events.
// It reconnects with backoff while the inbox lives (across node restarts,
// refused connections, 503s and 429s), lists the messages after every
// reconnect and yields those it missed, and never runs two streams for one
// Inbox. When the service ends the stream because another client opened
// one on the same inbox, it polls the list for a minute before opening the
// stream again, so two programs following one inbox do not cut each other
// off in turn. It ends with an error: ErrInboxGone when the inbox expired
// or was deleted, ErrStreamBusy when another stream of this Inbox runs, the
// wait-timeout error (ErrWaitTimeout, context.DeadlineExceeded) at ctx's
// deadline — DefaultWaitTimeout (20 s) when ctx has none: give a longer
// deadline to follow an inbox for longer — and context.Canceled when ctx is
// cancelled. Breaking out of the loop closes the stream.
//
// EventsTo(address) yields only the messages to that address (a tagged
// address of the inbox, compared without regard to case).
func (in *Inbox) Events(ctx context.Context, opts ...EventsOption) iter.Seq2[Event, error] {
	var o eventsOptions
	for _, f := range opts {
		f(&o)
	}
	return func(yield func(Event, error) bool) {
		if err := in.Gone(); err != nil {
			yield(Event{}, err)
			return
		}
		if !in.streaming.CompareAndSwap(false, true) {
			yield(Event{}, ErrStreamBusy)
			return
		}
		defer in.streaming.Store(false)
		ctx, cancel := in.c.waitContext(ctx)
		defer cancel()
		f := follower{in: in, seen: map[string]bool{}}
		err := f.run(ctx, false, func(ev Event) bool {
			if !o.inScope(ev.Message) {
				return true
			}
			return yield(ev, nil)
		})
		if errors.Is(err, context.DeadlineExceeded) {
			err = waitTimeout{last: f.last, events: true}
		}
		if err != nil {
			yield(Event{}, err)
		}
	}
}

// EventsOption configures Events.
type EventsOption func(*eventsOptions)

type eventsOptions struct{ to string }

// EventsTo makes Events yield only the messages to address (compared
// without regard to case): a recipient's tagged address, or the inbox's
// own.
func EventsTo(address string) EventsOption {
	return func(o *eventsOptions) { o.to = address }
}

func (o eventsOptions) inScope(s MessageSummary) bool {
	return o.to == "" || strings.EqualFold(s.To, o.to)
}

// follower runs one inbox's stream across reconnects.
type follower struct {
	in       *Inbox
	seen     map[string]bool // messages yielded (or present before Events began)
	fallback bool            // give up (errOpen) when the stream cannot be opened twice in a row
	lastList time.Time       // when the message list was last read
	last     error           // the last transient error, for the timeout's message
	listed   func()          // called after every list that is in (nil: none)
	parser   sseParser       // the stream's; its retry field outlives a stream
}

// errStop: the consumer stopped.
var errStop = errors.New("stopped")

// errReplaced: the service ended the stream because another stream was
// opened on the same inbox (the comment ": replaced" before the end).
var errReplaced = errors.New("mayfly: the service ended the event stream: another client opened one on this inbox (one stream per inbox)")

// replacedPause is how long a follower whose stream was replaced polls
// before opening the stream again.
const replacedPause = time.Minute

// transient reports whether err may pass: anything but the inbox gone, the
// context's end, the consumer's stop and an API refusal of the request
// itself (a 4xx other than a request-rate 429).
func transient(err error) bool {
	if err == nil || isGone(err) || errors.Is(err, errStop) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500 || errors.Is(e, ErrRateLimited)
	}
	return true
}

// run follows the stream until ctx ends, the inbox is gone, emit returns
// false (nil), or, with fallback, the stream cannot be opened twice in a row
// (the errOpen). The messages present when run begins are emitted when
// existing is set, and only marked seen otherwise.
func (f *follower) run(ctx context.Context, existing bool, emit func(Event) bool) error {
	in := f.in
	primed := existing
	failures := 0
	for attempt := 0; ; attempt++ {
		opened := time.Now()
		var err error
		if !primed {
			// What is there before the stream opens is not new: mark it
			// seen. What arrives between this list and the stream's
			// opening is found by the list that follows the opening.
			if err = f.catchUp(ctx, false, emit); err == nil {
				primed = true
			}
		}
		if err == nil {
			var resp *http.Response
			if resp, err = in.openStream(ctx); err == nil {
				// The stream is open: anything that arrives from now on
				// comes as an event, so the list now covers everything
				// before it.
				if err = f.catchUp(ctx, true, emit); err == nil {
					err = f.read(ctx, resp, emit)
				}
				resp.Body.Close()
			}
		}
		switch {
		case errors.Is(err, errStop):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case isGone(err):
			return in.markGone(err)
		case errors.Is(err, errReplaced):
			in.c.log.Warn("mayfly: "+strings.TrimPrefix(errReplaced.Error(), "mayfly: ")+"; polling the message list meanwhile",
				"every", in.c.poll, "for", replacedPause)
			pctx, cancel := context.WithTimeout(ctx, replacedPause)
			err = f.poll(pctx, emit)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return err // the consumer stopped (nil), or the inbox is gone
			}
			attempt, failures = 0, 0
			continue
		case !transient(err) && !errors.As(err, new(errOpen)):
			return err
		}
		if !errors.Is(err, io.EOF) { // a clean end is no failure to report
			f.last = err
		}
		var oe errOpen
		if errors.As(err, &oe) {
			failures++
			if failures >= 2 && f.fallback {
				return err
			}
		} else if primed {
			failures = 0 // it opened and was heard
			attempt = 0  // the reconnect after it is the first (the stream's retry field)
		}
		// The stream ended or broke while the inbox may live: is it alive?
		// (A failure to ask is one more reason to back off.)
		if _, cerr := in.Current(ctx); isGone(cerr) {
			return cerr
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(opened) > time.Minute {
			attempt = 0 // it ran a while: start the backoff over
		}
		wait := f.reconnectWait(err, attempt+1)
		in.c.log.Info("mayfly: event stream ended; reconnecting", "err", err, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// reconnectWait is the wait before reconnect number attempt after err
// (clients/SCENARIOS.md, "Retries"): after a stream that opened and then
// ended, the first reconnect waits the stream's last retry field plus the
// jitter (the service spreads a restarted node's streams so); an API error
// (a 503 or 429 with Retry-After) waits as the table says for a wait;
// anything else the table's backoff.
func (f *follower) reconnectWait(err error, attempt int) time.Duration {
	p := f.in.c.retry.withDefaults()
	var oe errOpen
	var e *Error
	switch {
	case !errors.As(err, &oe) && attempt == 1 && f.parser.retrySet:
		return f.parser.retry + rand.N(retryJitter+1)
	case errors.As(err, &e):
		if wait, ok := retryDecision(p, kindWait, attempt, *e.outcome(), 0, false); ok {
			return wait
		}
	}
	return p.backoff(attempt)
}

// poll lists the messages every poll interval (the first at once, unless a
// list was read less than the interval ago) and emits the new ones, until
// ctx ends, emit stops (nil) or the inbox is gone. A failed list waits for
// the next interval.
func (f *follower) poll(ctx context.Context, emit func(Event) bool) error {
	for {
		if err := sleep(ctx, f.in.c.poll-time.Since(f.lastList)); err != nil {
			return err
		}
		err := f.catchUp(ctx, true, emit)
		switch {
		case errors.Is(err, errStop):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case isGone(err):
			return f.in.markGone(err)
		case err != nil && !transient(err):
			return err
		case err != nil:
			f.last = err
			f.lastList = time.Now()
			f.in.c.log.Info("mayfly: listing the messages failed; trying again", "err", err, "in", f.in.c.poll)
		}
	}
}

// markGone returns the inbox's gone error, recording err as its cause when
// the inbox was not yet known gone.
func (in *Inbox) markGone(err error) error {
	if g := in.Gone(); g != nil {
		return g
	}
	in.goneErr.CompareAndSwap(nil, &gone{err: err})
	return in.Gone()
}

// openStream opens GET /events; past the open timeout without an answer, or
// with anything but a 200 event stream, it fails with errOpen (wrapping the
// API error, if any). The caller closes the body.
func (in *Inbox) openStream(ctx context.Context) (*http.Response, error) {
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(in.c.openTimeout, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, in.c.base.String()+"/events", nil)
	if err != nil {
		cancel()
		return nil, errOpen{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", in.c.ua)
	hc := &http.Client{Transport: in.c.transport, Jar: in.jar, CheckRedirect: in.hc.CheckRedirect} // no overall timeout: a stream lives long
	resp, err := hc.Do(req)
	switch {
	case err == nil:
		in.noteTransport(nil) // an answer: the service is reachable
	case ctx.Err() == nil:
		in.noteTransport(err)
	}
	if !timer.Stop() && err == nil {
		resp.Body.Close()
		err = fmt.Errorf("no answer within %v", in.c.openTimeout)
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errOpen{err}
	}
	if resp.StatusCode != http.StatusOK {
		err := decode(resp, nil)
		cancel()
		if isGone(err) {
			return nil, err
		}
		return nil, errOpen{err}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, errOpen{fmt.Errorf("content type %q, not an event stream", resp.Header.Get("Content-Type"))}
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// catchUp lists every message and marks the unseen ones seen, emitting them
// oldest first when emit is set.
func (f *follower) catchUp(ctx context.Context, emitNew bool, emit func(Event) bool) error {
	var unseen []MessageSummary
	for m, err := range f.in.All(ctx, 100) {
		if err != nil {
			return err
		}
		if !f.seen[m.ID] {
			unseen = append(unseen, m)
		}
	}
	f.lastList = time.Now() // after the answer: the next poll is ≥ the interval after it on the server too
	slices.Reverse(unseen)  // the list is newest first
	if f.listed != nil {
		defer f.listed() // the hub's waits look once the list's messages are in
	}
	for _, m := range unseen {
		f.seen[m.ID] = true
		if emitNew && !emit(Event{Type: EventMessageReceived, Message: m, Missed: true}) {
			return errStop
		}
	}
	return nil
}

// read follows an open stream until it ends (io.EOF), breaks, stays silent
// past the idle timeout, or emit stops it (errStop). The stream's retry
// field is kept for the reconnect (f.retry).
func (f *follower) read(ctx context.Context, resp *http.Response, emit func(Event) bool) (err error) {
	idle := time.AfterFunc(f.in.c.idle, func() { resp.Body.Close() })
	defer idle.Stop()
	heard := false
	defer func() {
		if !heard && ctx.Err() == nil {
			// Not one line, not even the heartbeat, in the idle timeout: a
			// stream that opens but never sends counts as unavailable.
			err = errOpen{errors.New("the stream sent nothing")}
		}
	}()
	p := &f.parser
	*p = sseParser{retry: p.retry, retrySet: p.retrySet} // a new stream: the retry value stays until it sends another
	var stop error
	onEvent := func(ev sseEvent) bool {
		if ev.Event != EventMessageReceived {
			return true
		}
		var m MessageSummary
		if json.Unmarshal([]byte(ev.Data), &m) != nil || m.ID == "" {
			// The payload is not the API's to define: list instead.
			if err := f.catchUp(ctx, true, emit); err != nil {
				stop = err
				return false
			}
			return true
		}
		if f.seen[m.ID] {
			return true
		}
		f.in.fillTo(&m)
		f.seen[m.ID] = true
		if !emit(Event{Type: ev.Event, Message: m}) {
			stop = errStop
			return false
		}
		return true
	}
	onComment := func(c string) bool {
		if strings.HasPrefix(strings.TrimSpace(c), "replaced") {
			stop = errReplaced
			return false
		}
		return true
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			f.in.noteTransport(nil) // the stream speaks: the service is reachable
			heard = true
			idle.Reset(f.in.c.idle)
			if !p.feed(buf[:n], onEvent, onComment) {
				return stop
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return io.EOF
			}
			return rerr
		}
	}
}

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

// ErrUnexpectedMessage: ExpectNoMessage saw a matching message. The error
// is an *UnexpectedMessageError carrying it.
var ErrUnexpectedMessage = errors.New("mayfly: an unexpected message arrived")

// UnexpectedMessageError is ExpectNoMessage's failure: Received is the
// message that arrived (TypeScript and Python name it received too).
type UnexpectedMessageError struct{ Received Message }

func (e *UnexpectedMessageError) Error() string {
	return fmt.Sprintf("%s: %q from %s at %s (id %s)", ErrUnexpectedMessage, e.Received.Subject, e.Received.From,
		e.Received.ReceivedAt.Format(time.RFC3339), e.Received.ID)
}

func (e *UnexpectedMessageError) Unwrap() error { return ErrUnexpectedMessage }

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

package client

// The event stream: Events, and the follower that keeps a stream open
// across reconnects (its parser is sse.go, its retry rules retry.go).

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

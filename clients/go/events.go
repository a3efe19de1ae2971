package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
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
// It reconnects with backoff while the inbox lives, lists the messages after
// every reconnect and yields those it missed, and never runs two streams for
// one Inbox. It ends with an error: ErrInboxGone when the inbox expired or
// was deleted, ErrStreamBusy when another stream of this Inbox runs, the
// context's error when ctx ends. Breaking out of the loop closes the stream.
func (in *Inbox) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if !in.streaming.CompareAndSwap(false, true) {
			yield(Event{}, ErrStreamBusy)
			return
		}
		defer in.streaming.Store(false)
		f := follower{in: in, seen: map[string]bool{}}
		err := f.run(ctx, false, func(ev Event) bool { return yield(ev, nil) })
		if err != nil {
			yield(Event{}, err)
		}
	}
}

// follower runs one inbox's stream across reconnects.
type follower struct {
	in       *Inbox
	seen     map[string]bool // messages yielded (or present before Events began)
	fallback bool            // give up (errOpen) when the stream cannot be opened twice in a row
	lastList time.Time       // when the message list was last read
}

// errStop: the consumer stopped.
var errStop = errors.New("stopped")

// run follows the stream until ctx ends, the inbox is gone, emit returns
// false (nil), or, with fallback, the stream cannot be opened twice in a row
// (the errOpen). The messages present when run begins are emitted when
// existing is set, and only marked seen otherwise.
func (f *follower) run(ctx context.Context, existing bool, emit func(Event) bool) error {
	in := f.in
	if !existing {
		// What is there before the stream opens is not new: mark it seen.
		// What arrives between this list and the stream's opening is found
		// by the list that follows the opening.
		if err := f.catchUp(ctx, false, emit); err != nil {
			if isGone(err) {
				return gone{err}
			}
			return err
		}
	}
	failures := 0
	for attempt := 0; ; attempt++ {
		opened := time.Now()
		resp, err := in.openStream(ctx)
		if err == nil {
			// The stream is open: anything that arrives from now on comes
			// as an event, so the list now covers everything before it.
			if err = f.catchUp(ctx, true, emit); err == nil {
				err = f.read(ctx, resp, emit)
			}
			resp.Body.Close()
			if errors.Is(err, errStop) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isGone(err) {
			return gone{err}
		}
		var oe errOpen
		if errors.As(err, &oe) {
			failures++
			if failures >= 2 && f.fallback {
				return err
			}
		} else {
			failures = 0 // it opened and was heard
		}
		// The stream ended or broke while the inbox may live: is it alive?
		if _, cerr := in.Current(ctx); isGone(cerr) {
			return gone{cerr}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(opened) > time.Minute {
			attempt = 0 // it ran a while: start the backoff over
		}
		wait := RetryPolicy{BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}.backoff(attempt + 1)
		in.c.log.Info("mayfly: event stream ended; reconnecting", "err", err, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return err
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
	for _, m := range unseen {
		f.seen[m.ID] = true
		if emitNew && !emit(Event{Type: EventMessageReceived, Message: m, Missed: true}) {
			return errStop
		}
	}
	return nil
}

// read follows an open stream until it ends (io.EOF), breaks, stays silent
// past the idle timeout, or emit stops it (errStop).
func (f *follower) read(ctx context.Context, resp *http.Response, emit func(Event) bool) (err error) {
	idle := time.AfterFunc(f.in.c.idle, func() { resp.Body.Close() })
	defer idle.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), 1<<20)
	var event, data strings.Builder
	heard := false
	defer func() {
		if !heard && ctx.Err() == nil {
			// Not one line, not even the heartbeat, in the idle timeout: a
			// stream that opens but never sends counts as unavailable.
			err = errOpen{errors.New("the stream sent nothing")}
		}
	}()
	for sc.Scan() {
		heard = true
		idle.Reset(f.in.c.idle)
		line := sc.Text()
		if line == "" { // dispatch
			typ, payload := event.String(), data.String()
			event.Reset()
			data.Reset()
			if typ != EventMessageReceived {
				continue
			}
			var m MessageSummary
			if json.Unmarshal([]byte(payload), &m) != nil || m.ID == "" {
				// The payload is not the API's to define: list instead.
				if err := f.catchUp(ctx, true, emit); err != nil {
					return err
				}
				continue
			}
			if f.seen[m.ID] {
				continue
			}
			f.seen[m.ID] = true
			if !emit(Event{Type: typ, Message: m}) {
				return errStop
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			event.Reset()
			event.WriteString(value)
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// Match selects messages for WaitForMessage; every condition set must hold,
// and the zero Match takes any message.
type Match struct {
	Subject *regexp.Regexp
	From    *regexp.Regexp
	Func    func(MessageSummary) bool
}

func (m Match) matches(s MessageSummary) bool {
	return (m.Subject == nil || m.Subject.MatchString(s.Subject)) &&
		(m.From == nil || m.From.MatchString(s.From)) &&
		(m.Func == nil || m.Func(s))
}

// WaitForMessage returns the first message that matches m, whether it
// arrived before the call or after, with its bodies (status "ready"; a
// failed message is passed over). It follows the event stream, and when the
// stream cannot be opened it polls the message list every poll interval
// (5 s or more). It ends with ctx (use a deadline), or with ErrInboxGone.
func (in *Inbox) WaitForMessage(ctx context.Context, m Match) (Message, error) {
	if !in.streaming.CompareAndSwap(false, true) {
		return Message{}, ErrStreamBusy
	}
	defer in.streaming.Store(false)
	var found *MessageSummary
	pick := func(ev Event) bool {
		if ev.Message.Status == StatusFailed || !m.matches(ev.Message) {
			return true
		}
		found = &ev.Message
		return false
	}
	f := follower{in: in, seen: map[string]bool{}, fallback: true}
	err := f.run(ctx, true, pick)
	var oe errOpen
	if errors.As(err, &oe) {
		in.c.log.Info("mayfly: event stream unavailable; polling the message list", "every", in.c.poll, "err", err)
		err = nil
		for found == nil && err == nil {
			// The first poll at once, unless a list was read less than
			// the interval ago; then one every interval.
			if err = sleep(ctx, in.c.poll-time.Since(f.lastList)); err == nil {
				if err = f.catchUp(ctx, true, pick); errors.Is(err, errStop) {
					err = nil
				}
			}
			if isGone(err) {
				err = gone{err}
			}
		}
	}
	if found == nil {
		return Message{}, err
	}
	// A pending message has no body yet: look again until it has.
	for {
		msg, err := in.Message(ctx, found.ID)
		if err != nil || msg.Status != StatusPending {
			return msg, err
		}
		if err := sleep(ctx, in.c.poll); err != nil {
			return Message{}, err
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// Error is an error answer of the API: its status, its stable code, the
// message, the details and the request id to quote when reporting a problem.
type Error struct {
	// Method and URL are the request's (the URL names no cookie; its query
	// is kept): every error says where it went.
	Method    string
	URL       string
	Status    int
	Code      string // error.code; empty when the body was not the envelope
	Message   string
	Details   map[string]any
	RequestID string
	// RetryAfter is the wait the service asked for (Retry-After, whole
	// seconds), or 0.
	RetryAfter time.Duration
	// retryAfterSet: the answer had a valid Retry-After (which may be 0).
	retryAfterSet bool
}

func (e *Error) Error() string {
	if e.Method == "" {
		return "mayfly: " + e.text()
	}
	return "mayfly: " + e.Method + " " + e.URL + ": " + e.text()
}

// text is the error without the package prefix: the status, the code, the
// message, the details (sorted by key) and the request id.
func (e *Error) text() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	b.WriteString(": " + msg)
	if len(e.Details) > 0 {
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(" [")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%v", k, e.Details[k])
		}
		b.WriteByte(']')
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	if slices.Contains(creationCodes, e.Code) {
		b.WriteString(": " + e.creationHelp())
	}
	return b.String()
}

// creationHelp explains a creation limit (clients/SCENARIOS.md): the
// window spent, the wait, and the way out.
func (e *Error) creationHelp() string {
	var window string
	switch {
	case e.Code == "ACTIVE_INBOX_LIMIT":
		window = "this IP has the most live inboxes the service allows (the active-inbox cap); delete one or wait for one to expire"
	case e.Code == "GLOBAL_CREATION_LIMIT":
		window = "the service's global cap of creations is reached"
	default:
		span := "day"
		if w, ok := e.Details["window"].(string); ok && w != "" {
			span = w
		} else if e.RetryAfter <= time.Minute {
			span = "minute"
		} else if e.RetryAfter <= time.Hour {
			span = "hour"
		}
		window = "this IP's " + span + " of creations is spent"
	}
	if e.RetryAfter > 0 {
		window += fmt.Sprintf("; retry in %d s", int((e.RetryAfter+time.Second-1)/time.Second))
	}
	return window + "; " + creationWayOut
}

// creationWayOut is the way out of a creation limit, in the three clients'
// words.
const creationWayOut = "a test suite can share one inbox and give each test its own address " +
	"(a shared inbox and tagged addresses: see the client's README)"

// Is matches e against the sentinels: by code where the API names one, by
// status otherwise.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	if s.match != nil {
		return s.match(e)
	}
	if len(s.codes) > 0 {
		return slices.Contains(s.codes, e.Code)
	}
	return s.status == e.Status
}

type sentinel struct {
	name   string
	status int               // matches any error of this status (when codes is empty)
	codes  []string          // matches these codes
	match  func(*Error) bool // or this
}

func (s *sentinel) Error() string { return "mayfly: " + s.name }

var creationCodes = []string{"CREATION_RATE_LIMITED", "ACTIVE_INBOX_LIMIT", "GLOBAL_CREATION_LIMIT"}

// Sentinels for errors.Is. The code sentinels follow Mayfly's documented
// codes; the status sentinels match any service's.
var (
	ErrBadRequest   error = &sentinel{name: "bad request", status: 400}
	ErrUnauthorized error = &sentinel{name: "unauthorized", status: 401}
	ErrNotFound     error = &sentinel{name: "not found", status: 404}
	// ErrRateLimited is the request rate (429 RATE_LIMITED, or any 429
	// that is not a creation limit), still refused after the retries.
	ErrRateLimited error = &sentinel{name: "rate limited", match: func(e *Error) bool {
		return e.Status == http.StatusTooManyRequests && !slices.Contains(creationCodes, e.Code)
	}}
	ErrInternal    error = &sentinel{name: "internal server error", status: 500}
	ErrUnavailable error = &sentinel{name: "service unavailable", status: 503}

	ErrSessionRequired    error = &sentinel{name: "session required", codes: []string{"MAILBOX_SESSION_REQUIRED"}}
	ErrSessionInvalid     error = &sentinel{name: "session invalid", codes: []string{"MAILBOX_SESSION_INVALID"}}
	ErrCredentialRequired error = &sentinel{name: "mailbox credential required", codes: []string{"MAILBOX_CREDENTIAL_REQUIRED"}}
	ErrCredentialInvalid  error = &sentinel{name: "mailbox credential invalid", codes: []string{"MAILBOX_CREDENTIAL_INVALID"}}
	ErrMailboxNotFound    error = &sentinel{name: "mailbox not found", codes: []string{"MAILBOX_NOT_FOUND"}}
	ErrMessageNotFound    error = &sentinel{name: "message not found", codes: []string{"MESSAGE_NOT_FOUND"}}
	// ErrCreationLimit is any limit on creating inboxes: the per-IP
	// windows, the active-inbox cap and the global cap. It is never
	// retried; Error.RetryAfter is the wait the service asked for (0 when
	// it named none: the active cap waits for an inbox to be deleted or
	// to expire).
	ErrCreationLimit       error = &sentinel{name: "creation limit", codes: creationCodes}
	ErrActiveInboxLimit    error = &sentinel{name: "active inbox limit", codes: []string{"ACTIVE_INBOX_LIMIT"}}
	ErrGlobalCreationLimit error = &sentinel{name: "global creation limit", codes: []string{"GLOBAL_CREATION_LIMIT"}}
)

// ErrInboxGone: the inbox was deleted (by this Inbox, which then sends no
// more requests) or the service no longer accepts its session (expired,
// deleted elsewhere, revoked). It cannot be recovered: create a new one.
// Every method of the Inbox returns it from then on. The error that
// carries it also matches the API error that showed it, if any.
var ErrInboxGone = errors.New("mayfly: inbox expired or deleted")

// ErrWaitTimeout: WaitForMessage's deadline passed with no matching
// message. The error also matches context.DeadlineExceeded.
var ErrWaitTimeout = errors.New("mayfly: no matching message before the deadline")

// ErrStreamBusy: an event stream of this Inbox is already running; the API
// asks for one stream per inbox.
var ErrStreamBusy = errors.New("mayfly: an event stream of this inbox is already open")

// ErrNoScopedCookie: the creation answer carried no cookie named
// <prefix>_<mailbox id without hyphens>.
var ErrNoScopedCookie = errors.New("mayfly: no mailbox-scoped cookie in the creation answer")

// gone wraps the API error (or nil, after the client's own Delete) that
// showed the inbox is gone.
type gone struct{ err error }

func (g gone) Error() string {
	var e *Error
	switch {
	case g.err == nil:
		return ErrInboxGone.Error()
	case errors.As(g.err, &e) && e.Method != "":
		return ErrInboxGone.Error() + " (" + e.Method + " " + e.URL + ": " + e.text() + ")"
	case errors.As(g.err, &e):
		return ErrInboxGone.Error() + " (" + e.text() + ")"
	}
	return ErrInboxGone.Error() + ": " + strings.TrimPrefix(g.err.Error(), "mayfly: ")
}

// Unwrap gives ErrInboxGone, ErrSessionInvalid (a gone inbox's session is
// invalid: clients/SCENARIOS.md) and the error that showed it, if any.
func (g gone) Unwrap() []error {
	if g.err == nil {
		return []error{ErrInboxGone, ErrSessionInvalid}
	}
	return []error{ErrInboxGone, ErrSessionInvalid, g.err}
}

// ErrUnreachable: every attempt of a wait failed at the transport level
// (no HTTP answer: connection refused or reset, a timeout) for the
// unreachable window (10 s by default, WithUnreachableAfter) in a row. The
// wait ends early with it rather than run out its deadline.
var ErrUnreachable = errors.New("mayfly: the service is unreachable")

// UnreachableError is ErrUnreachable's error (errors.As): the URL, the
// last transport error and for how long every attempt had failed
// (TypeScript's unreachableFor, Python's unreachable_for).
type UnreachableError struct {
	URL            string
	Last           error
	UnreachableFor time.Duration
}

func (u *UnreachableError) Error() string {
	return fmt.Sprintf("%s: %s answered nothing for %v (last error: %s)", ErrUnreachable, u.URL,
		u.UnreachableFor.Round(100*time.Millisecond), strings.TrimPrefix(errText(u.Last), "mayfly: "))
}

// Unwrap gives ErrUnreachable and the last transport error.
func (u *UnreachableError) Unwrap() []error {
	if u.Last == nil {
		return []error{ErrUnreachable}
	}
	return []error{ErrUnreachable, u.Last}
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

// waitTimeout is the error of a wait whose deadline passed: it says why
// (clients/SCENARIOS.md, "The wait timeout explains itself").
type waitTimeout struct {
	last    error         // the last transient error passed over
	down    time.Duration // for how long no attempt has had an answer (0: it answers)
	arrived int           // new messages that did not match
	first   string        // the first one's subject
	want    int           // WaitForMessages: how many were asked for
	got     int           // and how many matched
	events  bool          // Events' deadline, not a wait's
}

func (w waitTimeout) Error() string {
	var b strings.Builder
	b.WriteString(ErrWaitTimeout.Error())
	if w.want > 1 {
		fmt.Fprintf(&b, ": %d of %d matching messages", w.got, w.want)
	}
	switch {
	case w.events:
		b.WriteString(": the event stream's deadline passed")
	case w.down > 0:
		fmt.Fprintf(&b, ": the service has been unreachable for %v", w.down.Round(100*time.Millisecond))
	case w.arrived > 0:
		fmt.Fprintf(&b, ": %d messages arrived, none matched (first: %q)", w.arrived, w.first)
	case w.want <= 1:
		b.WriteString(": no message arrived")
	}
	if w.last != nil {
		b.WriteString(" (last error: " + strings.TrimPrefix(w.last.Error(), "mayfly: ") + ")")
	}
	return b.String()
}

func (w waitTimeout) Unwrap() []error { return []error{ErrWaitTimeout, context.DeadlineExceeded} }

// isGone reports whether err, the answer to a call made with the session
// (or to select), shows the inbox is gone: a 401, or a 404
// MAILBOX_NOT_FOUND.
func isGone(err error) bool {
	return errors.Is(err, ErrInboxGone) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrMailboxNotFound)
}

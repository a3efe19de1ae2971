package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is an error answer of the API: its status, its stable code, the
// message and the request id to quote when reporting a problem.
type Error struct {
	Status    int
	Code      string // error.code; empty when the body was not the envelope
	Message   string
	Details   map[string]any
	RequestID string
	// RetryAfter is the wait the service asked for (Retry-After), or 0.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code == "" {
		return fmt.Sprintf("mayfly: %d: %s (request %s)", e.Status, msg, e.RequestID)
	}
	return fmt.Sprintf("mayfly: %d %s: %s (request %s)", e.Status, e.Code, msg, e.RequestID)
}

// Is matches e against the sentinels: by code where the API names one, by
// status otherwise.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	if len(s.codes) > 0 {
		for _, c := range s.codes {
			if c == e.Code {
				return true
			}
		}
		return false
	}
	return s.status == e.Status
}

type sentinel struct {
	name   string
	status int      // matches any error of this status (when codes is empty)
	codes  []string // matches these codes
}

func (s *sentinel) Error() string { return "mayfly: " + s.name }

// Sentinels for errors.Is. The code sentinels follow Mayfly's documented
// codes; the status sentinels match any service's.
var (
	ErrBadRequest   error = &sentinel{name: "bad request", status: 400}
	ErrUnauthorized error = &sentinel{name: "unauthorized", status: 401}
	ErrNotFound     error = &sentinel{name: "not found", status: 404}
	ErrRateLimited  error = &sentinel{name: "rate limited", status: 429}
	ErrInternal     error = &sentinel{name: "internal server error", status: 500}
	ErrUnavailable  error = &sentinel{name: "service unavailable", status: 503}

	ErrSessionRequired    error = &sentinel{name: "session required", codes: []string{"MAILBOX_SESSION_REQUIRED"}}
	ErrSessionInvalid     error = &sentinel{name: "session invalid", codes: []string{"MAILBOX_SESSION_INVALID"}}
	ErrCredentialRequired error = &sentinel{name: "mailbox credential required", codes: []string{"MAILBOX_CREDENTIAL_REQUIRED"}}
	ErrCredentialInvalid  error = &sentinel{name: "mailbox credential invalid", codes: []string{"MAILBOX_CREDENTIAL_INVALID"}}
	ErrMailboxNotFound    error = &sentinel{name: "mailbox not found", codes: []string{"MAILBOX_NOT_FOUND"}}
	ErrMessageNotFound    error = &sentinel{name: "message not found", codes: []string{"MESSAGE_NOT_FOUND"}}
	// ErrCreationLimit is any limit on creating inboxes: the per-IP
	// windows, the active-inbox cap and the global cap.
	ErrCreationLimit       error = &sentinel{name: "creation limit", codes: []string{"CREATION_RATE_LIMITED", "ACTIVE_INBOX_LIMIT", "GLOBAL_CREATION_LIMIT"}}
	ErrActiveInboxLimit    error = &sentinel{name: "active inbox limit", codes: []string{"ACTIVE_INBOX_LIMIT"}}
	ErrGlobalCreationLimit error = &sentinel{name: "global creation limit", codes: []string{"GLOBAL_CREATION_LIMIT"}}
)

// ErrInboxGone: the inbox expired or was deleted (or its session was
// revoked); it cannot be recovered. The error that carries it also matches
// the API error that showed it (usually ErrSessionInvalid).
var ErrInboxGone = errors.New("mayfly: inbox expired or deleted")

// ErrStreamBusy: an event stream of this Inbox is already running; the API
// asks for one stream per inbox.
var ErrStreamBusy = errors.New("mayfly: an event stream of this inbox is already open")

// ErrNoScopedCookie: the creation answer carried no cookie named
// <prefix>_<mailbox id without hyphens>.
var ErrNoScopedCookie = errors.New("mayfly: no mailbox-scoped cookie in the creation answer")

// gone wraps an API error that means the inbox is gone.
type gone struct{ err error }

func (g gone) Error() string   { return ErrInboxGone.Error() + ": " + g.err.Error() }
func (g gone) Unwrap() []error { return []error{ErrInboxGone, g.err} }

// isGone reports whether err shows the inbox is gone: a 401 on a call made
// with the session, or a 404 MAILBOX_NOT_FOUND.
func isGone(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrMailboxNotFound)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

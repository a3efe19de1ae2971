package client

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The retry rules of clients/SCENARIOS.md ("Retries"), as one pure
// function: retryDecision. clients/testdata/retry.json holds its cases,
// which retry_test.go runs, as the TypeScript and Python clients' tests do.

// RetryPolicy bounds the retries of one call (see the package doc). Waits
// and event streams have no attempt cap: only their context's deadline.
type RetryPolicy struct {
	MaxAttempts   int           // attempts in all, the first included; default 6
	BaseDelay     time.Duration // the first backoff's cap; default 200 ms
	MaxDelay      time.Duration // no backoff is longer; default 5 s
	MaxRetryAfter time.Duration // a longer Retry-After is returned, not waited; default 10 s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 200 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 10 * time.Second
	}
	return p
}

// backoff is the wait before retry number attempt (1, 2, ...): full jitter
// over an exponentially growing cap.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	ceiling := p.BaseDelay << min(max(attempt, 1)-1, 20)
	if ceiling <= 0 || ceiling > p.MaxDelay {
		ceiling = p.MaxDelay
	}
	return rand.N(ceiling + 1)
}

// retryJitter is added to a Retry-After (or its 1 s default).
const retryJitter = 250 * time.Millisecond

// callKind says what a call may retry.
type callKind int

const (
	kindCreate callKind = iota // POST /mailboxes: only what was refused before anything was done
	kindSelect                 // POST select: as kindWrite; a missing mailbox means gone
	kindWrite                  // PATCH, DELETE: as kindCreate
	kindRead                   // GET: also 500, 503 and broken connections
	kindWait                   // a request of a wait or an event stream: as kindRead, no attempt cap
)

// Transport failures, as the rules tell them apart.
const (
	transportRefused = "refused" // nothing was sent
	transportReset   = "reset"   // after sending
	transportTimeout = "timeout" // after sending
)

// outcome is what failed in one attempt: an answer (status, code, its
// Retry-After) or a transport failure.
type outcome struct {
	status        int
	code          string
	retryAfter    time.Duration
	retryAfterSet bool   // a valid Retry-After came (0 included)
	transport     string // "" for an answer
}

func (e *Error) outcome() *outcome {
	return &outcome{status: e.Status, code: e.Code, retryAfter: e.RetryAfter, retryAfterSet: e.retryAfterSet}
}

// transportKind tells a refused connection (nothing sent) from a reset or
// a timeout after sending.
func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return transportRefused
	case errors.As(err, &ne) && ne.Timeout():
		return transportTimeout
	}
	return transportReset
}

// retryAfter reads a Retry-After header: a whole number of seconds, or
// nothing (an HTTP date or anything else is as if absent).
func retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) >= 0 || len(v) > 9 {
		return 0, false
	}
	s, err := strconv.Atoi(v)
	if err != nil {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

// retryDecision is the retry rules: after attempt number attempt (1 = the
// first) of a call of kind failed with o, and with left before the
// caller's deadline (when hasDeadline), whether to retry and after how
// long (drawn at random within the rule's range).
func retryDecision(p RetryPolicy, kind callKind, attempt int, o outcome, left time.Duration, hasDeadline bool) (time.Duration, bool) {
	p = p.withDefaults()
	if kind != kindWait && attempt >= p.MaxAttempts {
		return 0, false
	}
	safe := kind == kindRead || kind == kindWait // may be repeated after sending
	var wait time.Duration
	switch {
	case o.transport == transportRefused:
		wait = p.backoff(attempt)
	case o.transport != "":
		if !safe {
			return 0, false
		}
		wait = p.backoff(attempt)
	case slices.Contains(creationCodes, o.code):
		return 0, false // never: the creation-limit error at once
	case o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable && o.code == "REQUEST_PROTECTION":
		// Refused before anything was done: any call.
		wait = time.Second
		if o.retryAfterSet {
			wait = o.retryAfter
		}
		if wait > p.MaxRetryAfter {
			return 0, false
		}
		wait += rand.N(retryJitter + 1)
	case (o.status == http.StatusInternalServerError || o.status == http.StatusServiceUnavailable) && safe:
		if o.retryAfterSet && o.retryAfter > p.MaxRetryAfter {
			return 0, false
		}
		wait = max(p.backoff(attempt), o.retryAfter)
	default:
		return 0, false
	}
	if hasDeadline && wait > left {
		return 0, false // no retry outlives the deadline: the last error
	}
	return wait, true
}

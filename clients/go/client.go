package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mailbox is an inbox as the API shows it.
type Mailbox struct {
	ID           string    `json:"id"`
	Address      string    `json:"address"`
	Kind         string    `json:"kind"`
	ExpiresAt    time.Time `json:"expires_at"`
	MaxExpiresAt time.Time `json:"max_expires_at"`
}

// MarshalJSON writes a time the service gave none of (the zero time) as
// null, as the API shows it and as the TypeScript and Python clients write
// it in a state (not "0001-01-01T00:00:00Z").
func (m Mailbox) MarshalJSON() ([]byte, error) {
	orNull := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return json.Marshal(struct {
		ID           string     `json:"id"`
		Address      string     `json:"address"`
		Kind         string     `json:"kind"`
		ExpiresAt    *time.Time `json:"expires_at"`
		MaxExpiresAt *time.Time `json:"max_expires_at"`
	}{m.ID, m.Address, m.Kind, orNull(m.ExpiresAt), orNull(m.MaxExpiresAt)})
}

// MessageSummary is one item of the message list.
type MessageSummary struct {
	ID         string    `json:"id"`
	From       string    `json:"from"`
	Subject    string    `json:"subject"`
	ReceivedAt time.Time `json:"received_at"`
	Status     string    `json:"status"` // pending, ready or failed
	// To is the envelope recipient the message arrived for, lower-cased:
	// the inbox's address, or a tagged address of it (local+tag@domain).
	// A service older than sub-addressing sends none; the client fills in
	// the inbox's address.
	To string `json:"to"`
}

// Message is one message with its bodies (set once Status is "ready").
type Message struct {
	MessageSummary
	TextBody string `json:"text_body"`
	HTMLBody string `json:"html_body"` // sanitized; render it isolated, never inline
}

// Page is one page of the message list.
type Page struct {
	Items   []MessageSummary
	Limit   int
	Offset  int
	HasMore bool
}

// The message states.
const (
	StatusPending = "pending"
	StatusReady   = "ready"
	StatusFailed  = "failed"
)

// MinPollInterval is the API's floor for polling the message list.
const MinPollInterval = 5 * time.Second

// Client talks to one service. It is safe for concurrent use; each Inbox
// made from it has a cookie jar of its own.
type Client struct {
	base        *url.URL
	transport   http.RoundTripper
	timeout     time.Duration
	ua          string
	log         *slog.Logger
	retry       RetryPolicy
	poll        time.Duration
	openTimeout time.Duration
	idle        time.Duration
	waitDefault time.Duration // a wait whose ctx has no deadline gets this
	unreachable time.Duration // a wait fails with ErrUnreachable after this long without an answer (<0: never)
}

// DefaultWaitTimeout bounds a wait (WaitForMessage, WaitForMessages,
// ExpectNoMessage, Events) whose context has no deadline.
const DefaultWaitTimeout = 20 * time.Second

// DefaultUnreachableAfter is how long every attempt of a wait may fail at
// the transport level before the wait fails with ErrUnreachable.
const DefaultUnreachableAfter = 10 * time.Second

// discard is slog.DiscardHandler, which needs Go 1.24 (the module builds
// with 1.23).
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient takes the transport and timeout of hc (its jar is not used:
// every Inbox has its own).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc.Transport != nil {
			c.transport = hc.Transport
		}
		c.timeout = hc.Timeout
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithLogger logs retries, reconnects and fallbacks at debug and info level
// (never a cookie).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithRetry sets the retry policy of single calls.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithPollInterval sets WaitForMessage's polling interval when the event
// stream is unavailable; it is never shorter than MinPollInterval.
func WithPollInterval(d time.Duration) Option {
	return func(c *Client) { c.poll = max(d, MinPollInterval) }
}

// WithStreamTimeouts bounds how long opening the event stream may take
// before it counts as unavailable (default 10 s), and how long an open
// stream may stay silent (no event, no heartbeat) before it is reconnected
// (default 65 s, three heartbeats of 20 s).
func WithStreamTimeouts(open, idle time.Duration) Option {
	return func(c *Client) {
		if open > 0 {
			c.openTimeout = open
		}
		if idle > 0 {
			c.idle = idle
		}
	}
}

// WithDefaultTimeout sets how long a wait whose context has no deadline
// lasts (default DefaultWaitTimeout, 20 s). A context's deadline always
// wins.
func WithDefaultTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.waitDefault = d
		}
	}
}

// WithUnreachableAfter sets how long every attempt of a wait may fail at
// the transport level (no HTTP answer at all) before the wait fails early
// with ErrUnreachable (default DefaultUnreachableAfter, 10 s); a negative d
// never does.
func WithUnreachableAfter(d time.Duration) Option {
	return func(c *Client) {
		if d != 0 {
			c.unreachable = d
		}
	}
}

// New returns a Client for the API at baseURL, which includes the version
// prefix (e.g. "http://127.0.0.1:8080/v1").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mayfly: base URL %q: want http(s)://host/v1 (MAYFLY_URL unset?)", baseURL)
	}
	c := &Client{
		base: u, transport: http.DefaultTransport, timeout: 30 * time.Second,
		ua: "mayfly-go-client/1", log: slog.New(discard{}),
		retry: RetryPolicy{}.withDefaults(), poll: MinPollInterval,
		openTimeout: 10 * time.Second, idle: 65 * time.Second,
		waitDefault: DefaultWaitTimeout, unreachable: DefaultUnreachableAfter,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Inbox is one inbox with the cookie jar that gives access to it. It is safe
// for concurrent use, but runs one event stream at a time.
type Inbox struct {
	c         *Client
	jar       *jar
	hc        *http.Client
	mailbox   atomic.Pointer[Mailbox]
	streaming atomic.Bool
	// goneErr is set once the inbox is known gone (deleted by this Inbox,
	// or its session refused): every method returns it from then on.
	goneErr atomic.Pointer[gone]

	mu       sync.Mutex
	returned map[string]bool // messages returned by a wait or Message: "unseen" skips them
	order    []string        // returned, oldest first (bounded by maxReturned)
	// failing is when the current run of transport failures (no HTTP
	// answer) began; zero once anything answered. lastFail is the last.
	failing  time.Time
	lastFail error

	// hubMu guards hub: the one event stream that serves the waits of the
	// inbox's recipients (recipient.go).
	hubMu sync.Mutex
	hub   *hub
}

// fillTo gives a summary of a service older than sub-addressing (no to)
// the inbox's address.
func (in *Inbox) fillTo(s *MessageSummary) {
	if s.To == "" {
		s.To = strings.ToLower(in.Mailbox().Address)
	}
}

// noteTransport records the outcome of one attempt: err nil means an HTTP
// answer came (whatever its status).
func (in *Inbox) noteTransport(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err == nil {
		in.failing, in.lastFail = time.Time{}, nil
		return
	}
	if in.failing.IsZero() {
		in.failing = time.Now()
	}
	in.lastFail = err
}

// downSince is when the current run of transport failures began (zero:
// the last attempt had an answer) and its last error.
func (in *Inbox) downSince() (time.Time, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.failing, in.lastFail
}

// maxReturned bounds the ids an Inbox remembers as returned: a mailbox keeps
// at most 100 messages.
const maxReturned = 500

func (c *Client) newInbox() *Inbox {
	j := newJar(c.base)
	return &Inbox{c: c, jar: j, returned: map[string]bool{}, hc: &http.Client{
		Transport: c.transport, Jar: j, Timeout: c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Client returns the Client the inbox was made with.
func (in *Inbox) Client() *Client { return in.c }

// Mailbox returns the inbox as last seen (creation, Select, Current, Extend).
func (in *Inbox) Mailbox() Mailbox {
	if m := in.mailbox.Load(); m != nil {
		return *m
	}
	return Mailbox{}
}

// CreateOption configures one CreateInbox.
type CreateOption func(*createOptions)

type createOptions struct{ waitForCapacity bool }

// WaitForCapacity makes CreateInbox wait out a creation limit instead of
// failing at once: the Retry-After the service names, or polls every
// second for the active-inbox cap, within ctx's deadline (DefaultWaitTimeout
// when ctx has none); past it, the last creation-limit error. For parallel
// suites on the public limits.
func WaitForCapacity() CreateOption { return func(o *createOptions) { o.waitForCapacity = true } }

// CreateInbox creates an inbox that lives for lifetime (whole minutes, 1 to
// 10; 0 means the service's default) and selects it in a new cookie jar. A
// request-rate 429 and a refused connection are retried (nothing was done);
// a timeout or a broken connection after sending is not (an inbox may have
// been created). A creation limit is returned at once (unless
// WaitForCapacity): the error matches ErrCreationLimit and carries the wait
// the service asked for (RetryAfter).
func (c *Client) CreateInbox(ctx context.Context, lifetime time.Duration, opts ...CreateOption) (*Inbox, error) {
	var o createOptions
	for _, f := range opts {
		f(&o)
	}
	if !o.waitForCapacity {
		return c.createInbox(ctx, lifetime)
	}
	ctx, cancel := c.waitContext(ctx)
	defer cancel()
	for {
		in, err := c.createInbox(ctx, lifetime)
		var e *Error
		if !errors.Is(err, ErrCreationLimit) || !errors.As(err, &e) {
			return in, err
		}
		wait := e.RetryAfter
		if wait <= 0 {
			wait = time.Second // the active cap: an inbox must be deleted or expire
		}
		wait += rand.N(250 * time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, err
		}
		c.log.Debug("mayfly: waiting for capacity", "code", e.Code, "wait", wait)
		if sleep(ctx, wait) != nil {
			return nil, err
		}
	}
}

// waitContext gives ctx the default wait deadline when it has none.
func (c *Client) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.waitDefault)
}

func (c *Client) createInbox(ctx context.Context, lifetime time.Duration) (*Inbox, error) {
	body := []byte("{}")
	if lifetime > 0 {
		minutes := int((lifetime + time.Minute - 1) / time.Minute)
		body = []byte(`{"lifetime_minutes":` + strconv.Itoa(minutes) + `}`)
	}
	in := c.newInbox()
	var out struct {
		Mailbox Mailbox `json:"mailbox"`
	}
	if err := in.call(ctx, http.MethodPost, "/mailboxes", body, kindCreate, &out); err != nil {
		return nil, err
	}
	// The scoped cookie is <prefix>_<id without hyphens>; the prefix is the
	// service's to choose.
	suffix := "_" + strings.ReplaceAll(strings.ToLower(out.Mailbox.ID), "-", "")
	found := false
	for _, n := range in.jar.names() {
		found = found || strings.HasSuffix(strings.ToLower(n), suffix)
	}
	if !found || len(suffix) != 33 {
		return nil, fmt.Errorf("%w (mailbox %s)", ErrNoScopedCookie, out.Mailbox.ID)
	}
	in.mailbox.Store(&out.Mailbox)
	if _, err := in.Select(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// Select opens a new session on the inbox with its scoped cookie (the jar's
// service_session cookie is replaced).
func (in *Inbox) Select(ctx context.Context) (Mailbox, error) {
	id := in.Mailbox().ID
	if id == "" {
		return Mailbox{}, errors.New("mayfly: select: the inbox has no mailbox id")
	}
	return in.mailboxCall(ctx, http.MethodPost, "/mailboxes/"+url.PathEscape(id)+"/select", nil, kindSelect)
}

// Current returns the selected inbox.
func (in *Inbox) Current(ctx context.Context) (Mailbox, error) {
	return in.mailboxCall(ctx, http.MethodGet, "/mailboxes/current", nil, kindRead)
}

// Extend asks for minutes (1 to 10) more and returns the mailbox with the
// expiry granted (ExpiresAt), which never passes MaxExpiresAt: the grant
// may be smaller, or none.
func (in *Inbox) Extend(ctx context.Context, minutes int) (Mailbox, error) {
	return in.mailboxCall(ctx, http.MethodPatch, "/mailboxes/current",
		[]byte(`{"extension_minutes":`+strconv.Itoa(minutes)+`}`), kindWrite)
}

// Delete destroys the inbox and its messages; the jar's session is cleared.
// It is idempotent: an inbox already gone (deleted by this Inbox or
// another copy, expired) is no error, so a test's cleanup can always call
// it. From then on every other method of the Inbox returns ErrInboxGone
// without sending a request. DeleteExisted also says whether it existed.
func (in *Inbox) Delete(ctx context.Context) error {
	_, err := in.DeleteExisted(ctx)
	return err
}

// DeleteExisted is Delete, and reports whether the inbox still existed:
// false when it was already gone (no request is sent when this Inbox knew
// it).
func (in *Inbox) DeleteExisted(ctx context.Context) (existed bool, err error) {
	if in.Gone() != nil {
		return false, nil
	}
	err = in.call(ctx, http.MethodDelete, "/mailboxes/current", nil, kindWrite, nil)
	switch {
	case err == nil:
		in.goneErr.CompareAndSwap(nil, &gone{})
		return true, nil
	case isGone(err):
		in.markGone(err)
		return false, nil
	}
	return false, err
}

// Gone returns the ErrInboxGone error once the inbox is known to be gone
// (deleted by this Inbox, or its session refused by the service), else nil.
func (in *Inbox) Gone() error {
	if g := in.goneErr.Load(); g != nil {
		return *g
	}
	return nil
}

func (in *Inbox) mailboxCall(ctx context.Context, method, path string, body []byte, r callKind) (Mailbox, error) {
	var out struct {
		Mailbox Mailbox `json:"mailbox"`
	}
	if err := in.call(ctx, method, path, body, r, &out); err != nil {
		return Mailbox{}, err
	}
	in.mailbox.Store(&out.Mailbox)
	return out.Mailbox, nil
}

// List returns one page of messages, newest first.
func (in *Inbox) List(ctx context.Context, limit, offset int) (Page, error) {
	var out struct {
		Items      []MessageSummary `json:"items"`
		Pagination struct {
			Limit   int  `json:"limit"`
			Offset  int  `json:"offset"`
			HasMore bool `json:"has_more"`
		} `json:"pagination"`
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	if err := in.call(ctx, http.MethodGet, "/messages?"+q.Encode(), nil, kindRead, &out); err != nil {
		return Page{}, err
	}
	for i := range out.Items {
		in.fillTo(&out.Items[i])
	}
	return Page{Items: out.Items, Limit: out.Pagination.Limit, Offset: out.Pagination.Offset, HasMore: out.Pagination.HasMore}, nil
}

// All iterates over every message, newest first, pageSize at a time
// (1 to 100), advancing the offset by the page size while has_more is set.
// It stops at the first error, which it yields.
func (in *Inbox) All(ctx context.Context, pageSize int) iter.Seq2[MessageSummary, error] {
	return func(yield func(MessageSummary, error) bool) {
		for offset := 0; ; offset += pageSize {
			p, err := in.List(ctx, pageSize, offset)
			if err != nil {
				yield(MessageSummary{}, err)
				return
			}
			for _, m := range p.Items {
				if !yield(m, nil) {
					return
				}
			}
			if !p.HasMore || len(p.Items) == 0 {
				return
			}
		}
	}
}

// Message returns one message with its bodies. The message counts as seen:
// a wait with SinceUnseen (the default) passes over it.
func (in *Inbox) Message(ctx context.Context, id string) (Message, error) {
	var out struct {
		Message Message `json:"message"`
	}
	err := in.call(ctx, http.MethodGet, "/messages/"+url.PathEscape(id), nil, kindRead, &out)
	if err == nil {
		in.fillTo(&out.Message.MessageSummary)
		in.markReturned(out.Message.ID)
	}
	return out.Message, err
}

// DeleteMessage deletes one message.
func (in *Inbox) DeleteMessage(ctx context.Context, id string) error {
	return in.call(ctx, http.MethodDelete, "/messages/"+url.PathEscape(id), nil, kindWrite, nil)
}

// markReturned remembers that id was handed to the caller.
func (in *Inbox) markReturned(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if id == "" || in.returned[id] {
		return
	}
	in.returned[id] = true
	in.order = append(in.order, id)
	if len(in.order) > maxReturned {
		delete(in.returned, in.order[0])
		in.order = in.order[1:]
	}
}

func (in *Inbox) wasReturned(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.returned[id]
}

// call runs one API call with the retries kind allows and decodes the data
// envelope into out. Every call but creation is made with the session: a
// refusal of it marks the inbox gone.
func (in *Inbox) call(ctx context.Context, method, path string, body []byte, kind callKind, out any) error {
	if err := in.Gone(); err != nil && kind != kindCreate {
		return err
	}
	for attempt := 1; ; attempt++ {
		outcome, err := in.try(ctx, method, path, body, kind, out)
		if err == nil || ctx.Err() != nil || outcome == nil {
			return err
		}
		// No retry outlives the caller's deadline: the last error instead.
		left, hasDeadline := time.Duration(0), false
		if dl, ok := ctx.Deadline(); ok {
			left, hasDeadline = time.Until(dl), true
		}
		wait, retry := retryDecision(in.c.retry, kind, attempt, *outcome, left, hasDeadline)
		if !retry {
			return err
		}
		in.c.log.Debug("mayfly: retrying", "method", method, "path", redactPath(path), "err", err,
			"attempt", attempt, "wait", wait)
		if serr := sleep(ctx, wait); serr != nil {
			return err
		}
	}
}

// try makes one attempt. outcome is what the retry rules look at (nil: an
// error they have no say on, such as the inbox gone or a bad answer).
func (in *Inbox) try(ctx context.Context, method, path string, body []byte, kind callKind, out any) (*outcome, error) {
	resp, err := in.send(ctx, method, path, body, "application/json")
	if err != nil {
		return &outcome{transport: transportKind(err)}, err
	}
	err = decode(resp, out)
	if e, ok := err.(*Error); ok {
		e.Method, e.URL = method, in.c.base.String()+path
	}
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		return nil, err
	}
	if kind != kindCreate && (apiErr.Status == http.StatusUnauthorized ||
		kind == kindSelect && errors.Is(apiErr, ErrMailboxNotFound)) {
		g := &gone{err: apiErr}
		in.goneErr.CompareAndSwap(nil, g)
		return nil, in.Gone()
	}
	return apiErr.outcome(), err
}

// send makes one request with the inbox's jar.
func (in *Inbox) send(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, in.c.base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", in.c.ua)
	resp, err := in.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the method and the full URL
		}
		if ctx.Err() == nil {
			in.noteTransport(err)
		}
		return nil, fmt.Errorf("mayfly: %s %s: %w", method, in.c.base.String()+path, err)
	}
	in.noteTransport(nil)
	return resp, nil
}

// decode reads a response: the data envelope of a success into out, or the
// error envelope into an *Error.
func decode(resp *http.Response, out any) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("mayfly: reading the answer: %w", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil || resp.StatusCode == http.StatusNoContent {
			return nil
		}
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || len(env.Data) == 0 {
			return fmt.Errorf("mayfly: answer %d without a data envelope: %v", resp.StatusCode, err)
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("mayfly: answer %d: %w", resp.StatusCode, err)
		}
		return nil
	}
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-ID")}
	e.RetryAfter, e.retryAfterSet = retryAfter(resp.Header.Get("Retry-After"))
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(raw, &env) == nil {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
		if env.RequestID != "" {
			e.RequestID = env.RequestID
		}
	}
	if e.Code == "" && e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode) + ": " + notTheAPI
	}
	return e
}

// notTheAPI explains an error answer without the API's envelope (another
// server, a proxy, a base URL without /v1), in the three clients' words.
const notTheAPI = "not an answer of the Mayfly API (is the base URL the API's, ending in /v1?)"

// redactPath keeps logs free of anything but the route's shape.
func redactPath(p string) string {
	p, _, _ = strings.Cut(p, "?")
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SavedCookie is a cookie of a saved inbox.
type SavedCookie struct {
	Name    string
	Value   string
	Path    string
	Expires time.Time // zero: a session cookie (omitted from the JSON)
	Secure  bool
}

type savedCookieJSON struct {
	Name    string     `json:"name"`
	Value   string     `json:"value"`
	Path    string     `json:"path"`
	Expires *time.Time `json:"expires,omitempty"`
	Secure  bool       `json:"secure,omitempty"`
}

// MarshalJSON writes the shared state format's cookie: expires (RFC 3339,
// whole seconds) only for a persistent cookie.
func (c SavedCookie) MarshalJSON() ([]byte, error) {
	j := savedCookieJSON{Name: c.Name, Value: c.Value, Path: c.Path, Secure: c.Secure}
	if !c.Expires.IsZero() {
		t := c.Expires.UTC().Truncate(time.Second)
		j.Expires = &t
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the shared state format's cookie.
func (c *SavedCookie) UnmarshalJSON(b []byte) error {
	var j savedCookieJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = SavedCookie{Name: j.Name, Value: j.Value, Path: j.Path, Secure: j.Secure}
	if j.Expires != nil {
		c.Expires = *j.Expires
	}
	return nil
}

// StateVersion is the version of the state format State writes.
const StateVersion = 1

// State is what Restore needs to take an inbox up again in another process:
// the service, the mailbox, the jar's cookies and the messages already
// returned. Its JSON is the format the three official clients share
// (clients/SCENARIOS.md, "Save and restore"): a state written by the
// TypeScript or Python client restores here, and this one there. It holds
// secrets: keep it where only its owner can read it, never in logs.
type State struct {
	Version int           `json:"version"`
	Base    string        `json:"base"`
	Mailbox Mailbox       `json:"mailbox"`
	Cookies []SavedCookie `json:"cookies"`
	// Seen lists the messages already returned (by a wait or Message),
	// oldest first: a restored Inbox's SinceUnseen waits pass over them.
	Seen []string `json:"seen"`
	// Gone is set once the inbox is known to be gone.
	Gone bool `json:"gone,omitempty"`
}

// State returns the inbox's state for Restore.
func (in *Inbox) State() State {
	in.mu.Lock()
	seen := slices.Clone(in.order)
	in.mu.Unlock()
	if seen == nil {
		seen = []string{}
	}
	cookies := in.jar.saved()
	if cookies == nil {
		cookies = []SavedCookie{}
	}
	return State{Version: StateVersion, Base: in.c.base.String(), Mailbox: in.Mailbox(), Cookies: cookies, Seen: seen, Gone: in.Gone() != nil}
}

// Restore takes up an inbox saved with State (by this client or another
// official one). It makes no request. A state of another version, or of
// another service, is refused. (A state without a version, written before
// the shared format, reads as version 1.)
func (c *Client) Restore(st State) (*Inbox, error) {
	if st.Version != StateVersion && st.Version != 0 {
		return nil, fmt.Errorf("mayfly: state version %d: this client reads version %d", st.Version, StateVersion)
	}
	if strings.TrimSuffix(st.Base, "/") != c.base.String() {
		return nil, fmt.Errorf("mayfly: the inbox belongs to %s, not %s", st.Base, c.base)
	}
	in := c.newInbox()
	in.jar.restore(st.Cookies)
	m := st.Mailbox
	in.mailbox.Store(&m)
	for _, id := range st.Seen {
		in.markReturned(id)
	}
	if st.Gone {
		in.goneErr.Store(&gone{})
	}
	return in, nil
}

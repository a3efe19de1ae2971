package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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

func (discard) Enabled(context.Context, slog.Level) bool { return false }

func (discard) Handle(context.Context, slog.Record) error { return nil }

func (d discard) WithAttrs([]slog.Attr) slog.Handler { return d }

func (d discard) WithGroup(string) slog.Handler { return d }

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

// waitContext gives ctx the default wait deadline when it has none.
func (c *Client) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.waitDefault)
}

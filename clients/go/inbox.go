package client

// An inbox: its creation, its lifecycle and its reads. Its private state
// is one object (inboxState, internal.go) the parts share.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Inbox is one inbox with the cookie jar that gives access to it. It is safe
// for concurrent use, but runs one event stream at a time (its recipients
// share one).
type Inbox struct {
	*inboxState
}

// Client returns the Client the inbox was made with.
func (in *Inbox) Client() *Client { return in.c }

// Mailbox returns the inbox as last seen (creation, Select, Current, Extend).
func (in *Inbox) Mailbox() Mailbox { return in.box() }

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
func (in *Inbox) Gone() error { return in.goneError() }

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

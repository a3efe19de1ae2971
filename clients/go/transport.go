package client

// Transport: one API call with its retries (retry.go decides them), one
// request, and the answer decoded or turned into an *Error.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// call runs one API call with the retries kind allows and decodes the data
// envelope into out. Every call but creation is made with the session: a
// refusal of it marks the inbox gone.
func (in *inboxState) call(ctx context.Context, method, path string, body []byte, kind callKind, out any) error {
	if err := in.goneError(); err != nil && kind != kindCreate {
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
func (in *inboxState) try(ctx context.Context, method, path string, body []byte, kind callKind, out any) (*outcome, error) {
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
		return nil, in.goneError()
	}
	return apiErr.outcome(), err
}

// send makes one request with the inbox's jar.
func (in *inboxState) send(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
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

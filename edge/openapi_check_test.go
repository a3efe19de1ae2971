package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// checkResponse validates resp (status, headers, body) against openapi.yaml
// for the route of req. It fails t on any mismatch.
//
// Only the response is validated, never the request: tests send invalid
// requests on purpose, and what matters is that the answer is documented.
// Beyond the document it checks what the document can only say in prose:
// error codes allowed per response (x-error-codes), request_id equal to
// X-Request-ID, Retry-After and details per code, cookie attributes, ids
// echoing the path, pagination echoing the query, and the event-stream
// format when body holds (part of) a stream. Pass body nil for a stream
// that was not read. It reports with t.Errorf, so it may be called from any
// goroutine.
func checkResponse(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	s, err := loadSpec()
	if err != nil {
		t.Errorf("checkResponse: %v", err)
		return
	}
	if err := s.check(req, resp, body); err != nil {
		t.Errorf("checkResponse: %s %s -> %d:\n%v", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
	}
}

// specFile is relative to the package directory, the working directory of
// `go test`.
const specFile = "openapi.yaml"

// apiSpec is openapi.yaml loaded, validated and routed once per test binary.
type apiSpec struct {
	raw    []byte
	doc    *openapi3.T
	router routers.Router
	// schemaOpts carry the document's format validators and short errors to
	// every VisitJSON this file makes.
	schemaOpts []openapi3.SchemaValidationOption
}

var (
	specOnce   sync.Once
	loadedSpec *apiSpec
	specErr    error
)

func loadSpec() (*apiSpec, error) {
	specOnce.Do(func() { loadedSpec, specErr = readSpec(specFile) })
	return loadedSpec, specErr
}

func readSpec(path string) (*apiSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	// kin-openapi validates only byte, date and date-time out of the box, and
	// date-time loosely. These validators are scoped to this document rather
	// than registered globally, and hold our responses to what we promise:
	// canonical lower-case UUIDs, bare addresses, UTC RFC 3339 timestamps.
	doc.SetStringFormatValidator("uuid", openapi3.NewCallbackValidator(validUUID))
	doc.SetStringFormatValidator("email", openapi3.NewCallbackValidator(validEmail))
	doc.SetStringFormatValidator("date-time", openapi3.NewCallbackValidator(validDateTime))
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate %s: %w", path, err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", path, err)
	}
	opts := append(doc.GetSchemaValidationOptions(), openapi3.SetSchemaErrorMessageCustomizer(shortSchemaError))
	return &apiSpec{raw: raw, doc: doc, router: router, schemaOpts: opts}, nil
}

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func validUUID(s string) error {
	if !canonicalUUID.MatchString(s) {
		return errors.New("not a canonical lower-case UUID")
	}
	return nil
}

func validEmail(s string) error {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return errors.New("not a bare email address")
	}
	return nil
}

func validDateTime(s string) error {
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !strings.HasSuffix(s, "Z") {
		return errors.New("not an RFC 3339 date-time in UTC (Z)")
	}
	return nil
}

// shortSchemaError replaces kin-openapi's default message, which dumps the
// whole schema, with where the value is and what is wrong with it.
func shortSchemaError(err *openapi3.SchemaError) string {
	v, _ := json.Marshal(err.Value)
	if len(v) > 200 {
		v = append(v[:200], "…"...)
	}
	return fmt.Sprintf("at /%s: %s (value %s)", strings.Join(err.JSONPointer(), "/"), err.Reason, v)
}

// problems collects every mismatch of one response, so a failure lists them
// all at once.
type problems []error

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func (p *problems) add(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

func (s *apiSpec) check(req *http.Request, resp *http.Response, body []byte) error {
	var p problems
	checkCommonHeaders(&p, resp.Header)

	rreq := routeRequest(req)
	route, params, allowed := s.findRoute(rreq)
	status := resp.StatusCode
	head := req.Method == http.MethodHead
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	stream := mediaType == "text/event-stream"

	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		p.addf("status %d is not documented for %s %s (documented: %v)",
			status, route.Method, route.Path, slices.Sorted(maps.Keys(route.Operation.Responses.Map())))
		return errors.Join(p...)
	}

	opts := &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		ExcludeResponseBody:     stream || head,
		SchemaValidationOptions: s.doc.GetSchemaValidationOptions(),
	}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	// ValidateResponse returns early for HEAD; validate a HEAD answer's
	// status and headers as if it were the route's own method.
	vreq := rreq
	if head {
		vreq = rreq.Clone(rreq.Context())
		vreq.Method = route.Method
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route},
		Status:                 status,
		Header:                 resp.Header,
		Options:                opts,
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		p.add(err)
		return errors.Join(p...)
	}

	if stream && ref.Value.Content.Get(resp.Header.Get("Content-Type")) == nil {
		p.addf("content type %q is not documented for %d", resp.Header.Get("Content-Type"), status)
	}
	if status == http.StatusNoContent && len(body) > 0 {
		p.addf("204 with a %d-byte body", len(body))
	}
	if status == http.StatusMethodNotAllowed {
		checkAllow(&p, resp.Header.Get("Allow"), allowed)
	}
	switch {
	case head:
	case status >= 400:
		checkError(&p, params, ref.Value, resp.Header, body, strings.HasSuffix(route.Path, "/events"))
	case stream:
		if body != nil {
			s.checkEventStream(&p, body)
		}
	default:
		s.checkSuccess(&p, route.Operation.OperationID, rreq, params, resp, body)
	}
	return errors.Join(p...)
}

func checkCommonHeaders(p *problems, h http.Header) {
	if h.Get("X-Request-ID") == "" {
		p.addf("X-Request-ID missing or empty")
	}
	if got, want := h.Get("X-Content-Type-Options"), "nosniff"; got != want {
		p.addf("X-Content-Type-Options = %q, want %q", got, want)
	}
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			p.addf("CORS header %s present; cross-origin access is not enabled", k)
		}
	}
}

// routeRequest strips scheme and host: the document's only server is the
// relative /v1, which kin-openapi matches against the whole URL.
func routeRequest(req *http.Request) *http.Request {
	r := req.Clone(context.Background())
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	r.Host = ""
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	return r
}

// routeMethods are the methods tried to tell 405 (the path exists) from 404.
var routeMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodTrace, http.MethodConnect,
}

// findRoute returns the documented operation of req or, when there is none, a
// stand-in whose responses are what the server gives for an unknown path
// (404) or an unsupported method (405, with allowed the path's methods). The
// legacy router cannot tell these apart on templated paths, so the path's
// methods are found by trying each one.
func (s *apiSpec) findRoute(req *http.Request) (route *routers.Route, params map[string]string, allowed []string) {
	if route, params, ok := s.exactRoute(req); ok {
		return route, params, nil
	}
	for _, m := range routeMethods {
		r := req.Clone(req.Context())
		r.Method = m
		if _, _, ok := s.exactRoute(r); ok {
			allowed = append(allowed, m)
		}
	}
	miss := "RouteNotFound"
	missStatus := http.StatusNotFound
	if len(allowed) > 0 {
		miss, missStatus = "MethodNotAllowed", http.StatusMethodNotAllowed
	}
	resp := func(name string) *openapi3.ResponseRef { return s.doc.Components.Responses[name] }
	op := &openapi3.Operation{
		OperationID: "(none: " + miss + ")",
		Responses: openapi3.NewResponses(
			openapi3.WithStatus(missStatus, resp(miss)),
			openapi3.WithStatus(http.StatusRequestEntityTooLarge, resp("BodyTooLarge")),
			openapi3.WithStatus(http.StatusTooManyRequests, resp("RateLimited")),
			openapi3.WithStatus(http.StatusInternalServerError, resp("Internal")),
			openapi3.WithStatus(http.StatusServiceUnavailable, resp("ServiceUnavailable")),
		),
	}
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	return &routers.Route{Spec: s.doc, Path: req.URL.Path, Method: method, Operation: op}, map[string]string{}, allowed
}

// exactRoute is the router's match, kept only if the path matches the
// route's template segment by segment: the legacy router also matches
// "/messages/" to "/messages", which the server answers with 404.
func (s *apiSpec) exactRoute(req *http.Request) (*routers.Route, map[string]string, bool) {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return nil, nil, false
	}
	rest, ok := strings.CutPrefix(req.URL.EscapedPath(), s.doc.Servers[0].URL)
	if !ok {
		return nil, nil, false
	}
	want, got := strings.Split(route.Path, "/"), strings.Split(rest, "/")
	if len(want) != len(got) {
		return nil, nil, false
	}
	for i, w := range want {
		if strings.HasPrefix(w, "{") {
			if got[i] == "" {
				return nil, nil, false
			}
		} else if got[i] != w {
			return nil, nil, false
		}
	}
	return route, params, true
}

func checkAllow(p *problems, header string, allowed []string) {
	var got []string
	for m := range strings.SplitSeq(header, ",") {
		if m = strings.TrimSpace(m); m != "" {
			got = append(got, m)
		}
	}
	slices.Sort(got)
	want := slices.Clone(allowed)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		p.addf("Allow = %q, want exactly the documented methods %v", header, want)
	}
}

// errorDetail is the detail each code must carry, by the code table.
var errorDetail = map[string]string{
	"UNKNOWN_FIELD":      "field",
	"INVALID_FIELD":      "field",
	"INVALID_UUID":       "parameter",
	"INVALID_PAGINATION": "parameter",
	"BODY_TOO_LARGE":     "limit_bytes",
}

const maxBodyBytes = 16 << 10

func checkError(p *problems, params map[string]string, doc *openapi3.Response, h http.Header, body []byte, events bool) {
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		p.addf("error body: %v", err)
		return
	}
	code := e.Error.Code
	if got, want := e.RequestID, h.Get("X-Request-ID"); got != want {
		p.addf("request_id = %q, want X-Request-ID %q", got, want)
	}
	if codes := xErrorCodes(doc); !slices.Contains(codes, code) {
		p.addf("error code %s is not one this response documents (%v)", code, codes)
	}

	if key, ok := errorDetail[code]; ok {
		v, ok := e.Error.Details[key]
		switch {
		case !ok:
			p.addf("%s without details.%s", code, key)
		case code == "BODY_TOO_LARGE":
			if n, _ := v.(float64); n != maxBodyBytes {
				p.addf("details.limit_bytes = %v, want %d", v, maxBodyBytes)
			}
		case code == "INVALID_UUID":
			if name, _ := v.(string); params[name] == "" {
				p.addf("details.parameter = %v, want the path parameter (%v)", v, slices.Collect(maps.Keys(params)))
			}
		case code == "INVALID_PAGINATION":
			if v != "limit" && v != "offset" {
				p.addf("details.parameter = %v, want limit or offset", v)
			}
		default:
			if f, _ := v.(string); f == "" {
				p.addf("details.field = %v, want a field name", v)
			}
		}
	}

	retry := h.Get("Retry-After")
	switch code {
	case "REQUEST_PROTECTION":
		// GET /events spreads the clients it sheds over 1-3 s.
		if retry != "1" && (!events || retry != "2" && retry != "3") {
			p.addf("%s with Retry-After %q, want 1 (GET /events: 1, 2 or 3)", code, retry)
		}
	case "RATE_LIMITED", "DEPENDENCY_UNAVAILABLE":
		if retry != "1" {
			p.addf("%s with Retry-After %q, want 1", code, retry)
		}
	case "CREATION_RATE_LIMITED":
		if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 24*60*60 {
			p.addf("%s with Retry-After %q, want seconds until the window resets (1..86400)", code, retry)
		}
	case "ACTIVE_INBOX_LIMIT", "GLOBAL_CREATION_LIMIT":
		// May or may not carry one; the document validates it if present.
	default:
		if retry != "" {
			p.addf("%s with Retry-After %q, want none", code, retry)
		}
	}
}

// xErrorCodes reads the codes a documented error response may carry.
func xErrorCodes(r *openapi3.Response) []string {
	raw, _ := r.Extensions["x-error-codes"].([]any)
	codes := make([]string, 0, len(raw))
	for _, c := range raw {
		if s, ok := c.(string); ok {
			codes = append(codes, s)
		}
	}
	return codes
}

// mailboxView and the types below are the parts of success bodies the checks
// compare; the document has already validated their shape.
type mailboxView struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	ExpiresAt    *time.Time `json:"expires_at"`
	MaxExpiresAt *time.Time `json:"max_expires_at"`
}

type messageView struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Status     string    `json:"status"`
	TextBody   string    `json:"text_body"`
	HTMLBody   string    `json:"html_body"`
}

func (s *apiSpec) checkSuccess(p *problems, op string, req *http.Request, params map[string]string, resp *http.Response, body []byte) {
	switch op {
	case "createMailbox", "selectMailbox", "getCurrentMailbox", "extendCurrentMailbox":
		var b struct {
			Data struct {
				Mailbox mailboxView `json:"mailbox"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			p.addf("mailbox body: %v", err)
			return
		}
		m := b.Data.Mailbox
		checkMailbox(p, m)
		switch op {
		case "createMailbox":
			// The prefix is configurable; the suffix is what ties the
			// cookie to its mailbox.
			suffix := "_" + strings.ReplaceAll(m.ID, "-", "")
			checkSetCookie(p, resp, "*"+suffix, func(name string) bool {
				return len(name) > len(suffix) && strings.HasSuffix(name, suffix)
			}, m)
		case "selectMailbox":
			if got, want := m.ID, params["mailbox_id"]; !strings.EqualFold(got, want) {
				p.addf("selected mailbox id = %s, want the path's %s", got, want)
			}
			checkSetCookie(p, resp, "service_session", isSessionCookie, m)
		}
	case "deleteCurrentMailbox":
		c := findCookie(resp, isSessionCookie)
		switch {
		case c == nil:
			p.addf("no Set-Cookie clearing service_session")
		case c.MaxAge >= 0 || c.Path != "/v1":
			p.addf("service_session not cleared: want Max-Age=0 and Path=/v1, got %q", c.Raw)
		}
	case "listMessages":
		var b struct {
			Data struct {
				Items      []messageView `json:"items"`
				Pagination struct {
					Limit   int  `json:"limit"`
					Offset  int  `json:"offset"`
					HasMore bool `json:"has_more"`
				} `json:"pagination"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			p.addf("message list body: %v", err)
			return
		}
		pg, items := b.Data.Pagination, b.Data.Items
		q := req.URL.Query()
		if want := queryInt(q, "limit", 20); pg.Limit != want {
			p.addf("pagination.limit = %d, want %d", pg.Limit, want)
		}
		if want := queryInt(q, "offset", 0); pg.Offset != want {
			p.addf("pagination.offset = %d, want %d", pg.Offset, want)
		}
		if len(items) > pg.Limit {
			p.addf("%d items on a page of limit %d", len(items), pg.Limit)
		}
		if pg.HasMore && len(items) != pg.Limit {
			p.addf("has_more with %d items on a page of limit %d", len(items), pg.Limit)
		}
		for i := 1; i < len(items); i++ {
			if items[i].ReceivedAt.After(items[i-1].ReceivedAt) {
				p.addf("items not newest first: item %d received %s after item %d %s", i, items[i].ReceivedAt, i-1, items[i-1].ReceivedAt)
			}
		}
	case "getMessage":
		var b struct {
			Data struct {
				Message messageView `json:"message"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			p.addf("message body: %v", err)
			return
		}
		m := b.Data.Message
		if got, want := m.ID, params["message_id"]; !strings.EqualFold(got, want) {
			p.addf("message id = %s, want the path's %s", got, want)
		}
		if m.Status != "ready" && (m.TextBody != "" || m.HTMLBody != "") {
			p.addf("message with status %s has a body; bodies are empty unless ready", m.Status)
		}
	case "getOpenAPIDocument":
		if !bytes.Equal(body, s.raw) {
			p.addf("served document differs from %s", specFile)
		}
	}
}

func queryInt(q url.Values, key string, def int) int {
	if n, err := strconv.Atoi(q.Get(key)); err == nil {
		return n
	}
	return def
}

func checkMailbox(p *problems, m mailboxView) {
	if got, want := m.Kind, "temporary"; got != want {
		p.addf("mailbox kind = %q, want %q", got, want)
	}
	if m.ExpiresAt == nil || m.MaxExpiresAt == nil {
		p.addf("mailbox expires_at or max_expires_at is null")
		return
	}
	if m.ExpiresAt.After(*m.MaxExpiresAt) {
		p.addf("expires_at %s after max_expires_at %s", m.ExpiresAt, m.MaxExpiresAt)
	}
}

func isSessionCookie(name string) bool { return name == "service_session" }

func findCookie(resp *http.Response, match func(name string) bool) *http.Cookie {
	for _, c := range resp.Cookies() {
		if match(c.Name) {
			return c
		}
	}
	return nil
}

// checkSetCookie checks the attributes spec §5 and the document promise. Secure
// is not checked: it depends on MAYFLY_COOKIE_SECURE.
func checkSetCookie(p *problems, resp *http.Response, name string, match func(string) bool, m mailboxView) {
	c := findCookie(resp, match)
	if c == nil {
		p.addf("no Set-Cookie named %s", name)
		return
	}
	if c.Value == "" {
		p.addf("cookie %s has an empty value", c.Name)
	}
	if !c.HttpOnly {
		p.addf("cookie %s not HttpOnly", c.Name)
	}
	if c.SameSite != http.SameSiteLaxMode {
		p.addf("cookie %s SameSite = %v, want Lax", c.Name, c.SameSite)
	}
	if c.Path != "/v1" {
		p.addf("cookie %s Path = %q, want /v1", c.Name, c.Path)
	}
	if c.Domain != "" {
		p.addf("cookie %s has Domain %q; it must be host-only", c.Name, c.Domain)
	}
	if m.MaxExpiresAt != nil {
		// Expires has whole seconds; max_expires_at may not.
		if d := c.Expires.Sub(*m.MaxExpiresAt); d < -time.Second || d > time.Second {
			p.addf("cookie %s Expires = %s, want max_expires_at %s", c.Name, c.Expires, m.MaxExpiresAt)
		}
	}
}

// startRetry reports whether v is the retry: of a stream's start: 1000 to
// 5999 ms, drawn per stream.
func startRetry(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1000 && n < 6000 && strconv.Itoa(n) == v
}

// checkEventStream checks the complete events of a (possibly partial) stream:
// it starts with "retry: <ms>" (1000-5999, drawn per stream), comments are heartbeats, and each event is a
// message.received whose id is its data's id and whose data is a
// MessageSummary on one line.
func (s *apiSpec) checkEventStream(p *problems, body []byte) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	first := true
	var event, id, data string
	var fields int
	complete := func() {
		defer func() { event, id, data, fields = "", "", "", 0 }()
		if fields == 0 {
			return
		}
		if event != "message.received" {
			p.addf("event %q, want message.received", event)
			return
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			p.addf("event data %q: %v", data, err)
			return
		}
		schema := s.doc.Components.Schemas["MessageSummary"].Value
		if err := schema.VisitJSON(v, append(s.schemaOpts, openapi3.VisitAsResponse(), openapi3.MultiErrors())...); err != nil {
			p.addf("event data is not a MessageSummary: %v", err)
			return
		}
		if got, _ := v.(map[string]any)["id"].(string); got != id {
			p.addf("event id %q, data id %q", id, got)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			if v, ok := strings.CutPrefix(line, "retry: "); ok && startRetry(v) {
				continue
			}
			p.addf("stream starts with %q, want \"retry: <1000-5999>\"", line)
		}
		if line == "" {
			complete()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			event = value
		case "id":
			id = value
		case "data":
			if data != "" {
				p.addf("event data spans several lines")
			}
			data = value
		case "retry":
			if !startRetry(value) {
				p.addf("retry: %s, want 1000-5999", value)
			}
			continue
		default:
			p.addf("unknown stream field %q", name)
		}
		fields++
	}
	// A trailing event without its blank line may be cut short: not checked.
}

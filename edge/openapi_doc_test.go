package edge_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

func TestOpenAPIDocumentLoadsAndValidates(t *testing.T) {
	s, err := loadSpec() // validates the document
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.doc.OpenAPI, "3.0.3"; got != want {
		t.Errorf("openapi = %q, want %q", got, want)
	}
	if got, want := s.doc.Info.Version, "1.0.0"; got != want {
		t.Errorf("info.version = %q, want %q", got, want)
	}
	if got := s.doc.Servers; len(got) != 1 || got[0].URL != "/v1" {
		t.Errorf("servers = %v, want the single relative server /v1", got)
	}
}

// TestOpenAPIPaths pins the document to spec §4: every path with exactly its
// methods, and each operation's security.
func TestOpenAPIPaths(t *testing.T) {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	type op struct{ path, method, security string } // security: "" none, else the scheme
	want := []op{
		{"/domains", "GET", ""},
		{"/mailboxes", "POST", ""},
		{"/mailboxes/{mailbox_id}/select", "POST", "mailboxCookie"},
		{"/mailboxes/current", "GET", "sessionCookie"},
		{"/mailboxes/current", "PATCH", "sessionCookie"},
		{"/mailboxes/current", "DELETE", "sessionCookie"},
		{"/messages", "GET", "sessionCookie"},
		{"/messages/{message_id}", "GET", "sessionCookie"},
		{"/messages/{message_id}", "DELETE", "sessionCookie"},
		{"/events", "GET", "sessionCookie"},
		{"/openapi.yaml", "GET", ""},
	}
	var got []op
	for path, item := range s.doc.Paths.Map() {
		for method, o := range item.Operations() {
			if o.Security == nil {
				t.Errorf("%s %s declares no security; use [] for none", method, path)
				continue
			}
			var schemes []string
			for _, req := range *o.Security {
				schemes = append(schemes, slices.Collect(maps.Keys(req))...)
			}
			got = append(got, op{path, method, strings.Join(schemes, ",")})
		}
	}
	cmp := func(a, b op) int { return strings.Compare(a.path+" "+a.method, b.path+" "+b.method) }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Errorf("operations:\n got %v\nwant %v", got, want)
	}
}

// codeStatus is the error-code table the lead fixed; the document must agree.
var codeStatus = map[string]int{
	"INVALID_JSON":                400,
	"UNKNOWN_FIELD":               400,
	"INVALID_FIELD":               400,
	"INVALID_UUID":                400,
	"INVALID_PAGINATION":          400,
	"BODY_TOO_LARGE":              413,
	"MALFORMED_REQUEST":           400,
	"HEADERS_TOO_LARGE":           431,
	"MAILBOX_SESSION_REQUIRED":    401,
	"MAILBOX_SESSION_INVALID":     401,
	"MAILBOX_CREDENTIAL_REQUIRED": 401,
	"MAILBOX_CREDENTIAL_INVALID":  401,
	"MAILBOX_NOT_FOUND":           404,
	"MESSAGE_NOT_FOUND":           404,
	"ROUTE_NOT_FOUND":             404,
	"METHOD_NOT_ALLOWED":          405,
	"RATE_LIMITED":                429,
	"CREATION_RATE_LIMITED":       429,
	"ACTIVE_INBOX_LIMIT":          429,
	"GLOBAL_CREATION_LIMIT":       429,
	"INTERNAL":                    500,
	"DEPENDENCY_UNAVAILABLE":      503,
	"REQUEST_PROTECTION":          503,
}

// TestOpenAPIErrorResponses checks the error side of every operation: the
// ErrorCode enum is the table, each error response lists codes of its own
// status, every operation can answer 413, 429, 500 and 503, and every response
// declares the headers every response carries.
func TestOpenAPIErrorResponses(t *testing.T) {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, v := range s.doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	if got, want := slices.Sorted(slices.Values(enum)), slices.Sorted(maps.Keys(codeStatus)); !slices.Equal(got, want) {
		t.Errorf("ErrorCode enum:\n got %v\nwant %v", got, want)
	}

	used := map[string]bool{}
	checkResp := func(where string, status int, r *openapi3.Response) {
		for _, h := range []string{"X-Request-ID", "X-Content-Type-Options", "Cache-Control"} {
			if hr := r.Headers[h]; hr == nil || !hr.Value.Required {
				t.Errorf("%s %d: header %s not declared required", where, status, h)
			}
		}
		if status < 400 {
			return
		}
		codes := xErrorCodes(r)
		if len(codes) == 0 {
			t.Errorf("%s %d: no x-error-codes", where, status)
		}
		for _, c := range codes {
			used[c] = true
			if got, want := status, codeStatus[c]; got != want {
				t.Errorf("%s: code %s under status %d, want %d", where, c, got, want)
			}
		}
		if mt := r.Content.Get("application/json"); mt == nil || mt.Schema.Ref != "#/components/schemas/Error" {
			t.Errorf("%s %d: body is not the Error schema", where, status)
		}
	}
	for path, item := range s.doc.Paths.Map() {
		for method, o := range item.Operations() {
			where := method + " " + path
			for _, status := range []int{413, 429, 500, 503} {
				if o.Responses.Status(status) == nil {
					t.Errorf("%s: no %d response", where, status)
				}
			}
			for key, ref := range o.Responses.Map() {
				status, err := strconv.Atoi(key)
				if err != nil {
					t.Errorf("%s: response %q is not a status code", where, key)
					continue
				}
				checkResp(where, status, ref.Value)
			}
		}
	}
	for _, name := range []string{"RouteNotFound", "MethodNotAllowed"} {
		r := s.doc.Components.Responses[name].Value
		checkResp(name, codeStatus[xErrorCodes(r)[0]], r)
	}
	for c := range codeStatus {
		if !used[c] {
			t.Errorf("code %s is in no response", c)
		}
	}
}

// recorderTB stands in for the test in checkResponse's own tests: it records
// failures instead of failing the real test. Anything else goes to the real
// test.
type recorderTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorderTB) Helper() {}

func (r *recorderTB) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, s)
}

func (r *recorderTB) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorderTB) Fatalf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorderTB) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorderTB) Fatal(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorderTB) Fail()                             { r.record("Fail") }
func (r *recorderTB) FailNow()                          { r.record("FailNow") }

const (
	mailboxID = "0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93"
	messageID = "9b2f0c4e-6a51-4d55-9a53-2f1f0e0b7c11"
	requestID = "req-1"
)

func mailboxJSON(extra string) string {
	return `{"data":{"mailbox":{"id":"` + mailboxID + `","address":"k7q2m9xw4p@mayfly.example","kind":"temporary",` +
		`"expires_at":"2025-01-01T12:10:00Z","max_expires_at":"2025-01-01T13:00:00Z"` + extra + `}}}`
}

func errorJSON(code, details, reqID string) string {
	d := ""
	if details != "" {
		d = `,"details":` + details
	}
	return `{"error":{"code":"` + code + `","message":"m"` + d + `},"request_id":"` + reqID + `"}`
}

const (
	scopedCookie  = "mayfly_0b5e2a7c3f1d4e8a9c6b7d2e1f0a4b93=secret; expires=Wed, 01 Jan 2025 13:00:00 GMT; path=/v1; HttpOnly; Secure; SameSite=Lax"
	sessionSet    = "service_session=secret; expires=Wed, 01 Jan 2025 13:00:00 GMT; path=/v1; HttpOnly; Secure; SameSite=Lax"
	sessionClear  = "service_session=; max-age=0; path=/v1; HttpOnly; Secure; SameSite=Lax"
	messageOneSum = `{"id":"` + messageID + `","from":"alice@example.org","subject":"Your code","received_at":"2025-01-01T12:00:05Z","status":"ready"}`
)

func TestCheckResponse(t *testing.T) {
	spec, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	jsonHdr := func(kv ...string) map[string]string {
		h := map[string]string{
			"Content-Type":           "application/json",
			"X-Request-ID":           requestID,
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "no-store",
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	streamHdr := jsonHdr("Content-Type", "text/event-stream", "Cache-Control", "no-cache", "X-Accel-Buffering", "no")
	noBody := jsonHdr("Content-Type", "")
	mbox, sel := "/v1/mailboxes/"+mailboxID+"/select", "/v1/messages/"+messageID
	page := func(items string, limit, offset int, more bool) string {
		return fmt.Sprintf(`{"data":{"items":[%s],"pagination":{"limit":%d,"offset":%d,"has_more":%t}}}`, items, limit, offset, more)
	}
	summary := func(id, at string) string {
		return `{"id":"` + id + `","from":"a@b.c","subject":"s","received_at":"` + at + `","status":"ready"}`
	}
	message := func(status, text string) string {
		return `{"data":{"message":{"id":"` + messageID + `","from":"a@b.c","subject":"s","received_at":"2025-01-01T12:00:05Z","status":"` +
			status + `","text_body":"` + text + `","html_body":""}}}`
	}

	tests := []struct {
		name    string
		method  string
		path    string
		status  int
		header  map[string]string
		cookies []string
		body    string
		nilBody bool
		wantErr string // "" : passes; else a substring of the failure
	}{
		// Valid responses pass.
		{"create", "POST", "/v1/mailboxes", 201, jsonHdr(), []string{scopedCookie}, mailboxJSON(""), false, ""},
		{"select", "POST", mbox, 200, jsonHdr(), []string{sessionSet}, mailboxJSON(""), false, ""},
		{"current", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, mailboxJSON(""), false, ""},
		{"current json charset", "GET", "/v1/mailboxes/current", 200, jsonHdr("Content-Type", "application/json; charset=utf-8"), nil, mailboxJSON(""), false, ""},
		{"delete mailbox", "DELETE", "/v1/mailboxes/current", 204, noBody, []string{sessionClear}, "", false, ""},
		{"domains", "GET", "/v1/domains", 200, jsonHdr(), nil, `{"data":{"domains":["mayfly.example"]}}`, false, ""},
		{"empty page", "GET", "/v1/messages", 200, jsonHdr(), nil, page("", 20, 0, false), false, ""},
		{"full page", "GET", "/v1/messages?limit=2&offset=4", 200, jsonHdr(), nil,
			page(summary(messageID, "2025-01-01T12:00:05Z")+","+summary(mailboxID, "2025-01-01T12:00:01.5Z"), 2, 4, true), false, ""},
		{"message", "GET", sel, 200, jsonHdr(), nil, message("ready", "hi"), false, ""},
		{"failed message", "GET", sel, 200, jsonHdr(), nil, message("failed", ""), false, ""},
		{"delete message", "DELETE", sel, 204, noBody, nil, "", false, ""},
		{"events unread", "GET", "/v1/events", 200, streamHdr, nil, "", true, ""},
		{"events partial", "GET", "/v1/events", 200, streamHdr, nil,
			"retry: 3721\n\n: ping\n\nevent: message.received\nid: " + messageID + "\ndata: " + messageOneSum + "\n\nevent: mess", false, ""},
		{"document", "GET", "/v1/openapi.yaml", 200, jsonHdr("Content-Type", "application/yaml", "Cache-Control", "public, max-age=300"), nil, string(spec), false, ""},
		{"invalid pagination", "GET", "/v1/messages?limit=abc", 400, jsonHdr(), nil, errorJSON("INVALID_PAGINATION", `{"parameter":"limit"}`, requestID), false, ""},
		{"invalid uuid", "POST", "/v1/mailboxes/nope/select", 400, jsonHdr(), nil, errorJSON("INVALID_UUID", `{"parameter":"mailbox_id"}`, requestID), false, ""},
		{"unknown field", "POST", "/v1/mailboxes", 400, jsonHdr(), nil, errorJSON("UNKNOWN_FIELD", `{"field":"x"}`, requestID), false, ""},
		{"too large", "PATCH", "/v1/mailboxes/current", 413, jsonHdr(), nil, errorJSON("BODY_TOO_LARGE", `{"limit_bytes":16384}`, requestID), false, ""},
		{"session required", "GET", "/v1/messages", 401, jsonHdr(), nil, errorJSON("MAILBOX_SESSION_REQUIRED", "", requestID), false, ""},
		{"rate limited", "GET", "/v1/domains", 429, jsonHdr("Retry-After", "1"), nil, errorJSON("RATE_LIMITED", "", requestID), false, ""},
		{"creation limited", "POST", "/v1/mailboxes", 429, jsonHdr("Retry-After", "37"), nil, errorJSON("CREATION_RATE_LIMITED", "", requestID), false, ""},
		{"active limit", "POST", "/v1/mailboxes", 429, jsonHdr(), nil, errorJSON("ACTIVE_INBOX_LIMIT", "", requestID), false, ""},
		{"unavailable", "GET", "/v1/events", 503, jsonHdr("Retry-After", "1"), nil, errorJSON("DEPENDENCY_UNAVAILABLE", "", requestID), false, ""},
		{"route not found", "GET", "/v1/nope", 404, jsonHdr(), nil, errorJSON("ROUTE_NOT_FOUND", "", requestID), false, ""},
		{"outside /v1", "GET", "/mailboxes/current", 404, jsonHdr(), nil, errorJSON("ROUTE_NOT_FOUND", "", requestID), false, ""},
		{"method not allowed", "PUT", sel, 405, jsonHdr("Allow", "DELETE, GET"), nil, errorJSON("METHOD_NOT_ALLOWED", "", requestID), false, ""},
		{"preflight", "OPTIONS", "/v1/mailboxes/current", 405, jsonHdr("Allow", "GET, PATCH, DELETE"), nil, errorJSON("METHOD_NOT_ALLOWED", "", requestID), false, ""},
		{"trailing slash", "GET", "/v1/messages/", 404, jsonHdr(), nil, errorJSON("ROUTE_NOT_FOUND", "", requestID), false, ""},
		{"empty id", "GET", "/v1/mailboxes//select", 404, jsonHdr(), nil, errorJSON("ROUTE_NOT_FOUND", "", requestID), false, ""},
		{"preflight on a fixed path", "OPTIONS", "/v1/messages", 405, jsonHdr("Allow", "GET"), nil, errorJSON("METHOD_NOT_ALLOWED", "", requestID), false, ""},
		{"too large on a read", "GET", "/v1/domains", 413, jsonHdr(), nil, errorJSON("BODY_TOO_LARGE", `{"limit_bytes":16384}`, requestID), false, ""},
		{"rate limited unknown path", "GET", "/v1/nope", 429, jsonHdr("Retry-After", "1"), nil, errorJSON("RATE_LIMITED", "", requestID), false, ""},

		// Mismatches fail.
		{"extra property in Mailbox", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, mailboxJSON(`,"owner":"x"`), false, `"owner" is unsupported`},
		{"missing request_id", "GET", "/v1/messages", 401, jsonHdr(), nil, `{"error":{"code":"MAILBOX_SESSION_REQUIRED","message":"m"}}`, false, "request_id"},
		{"unknown error code", "GET", "/v1/messages", 401, jsonHdr(), nil, errorJSON("NOT_LOGGED_IN", "", requestID), false, "/error/code"},
		{"wrong status for route", "GET", "/v1/domains", 401, jsonHdr(), nil, errorJSON("MAILBOX_SESSION_REQUIRED", "", requestID), false, "is not documented"},
		{"missing X-Request-ID", "GET", "/v1/mailboxes/current", 200, jsonHdr("X-Request-ID", ""), nil, mailboxJSON(""), false, "X-Request-ID"},
		{"request_id differs from header", "GET", "/v1/messages", 401, jsonHdr(), nil, errorJSON("MAILBOX_SESSION_REQUIRED", "", "other"), false, "want X-Request-ID"},
		{"code of another response", "POST", mbox, 404, jsonHdr(), nil, errorJSON("MESSAGE_NOT_FOUND", "", requestID), false, "not one this response documents"},
		{"201 on a read", "GET", "/v1/mailboxes/current", 201, jsonHdr(), nil, mailboxJSON(""), false, "is not documented"},
		{"upper-case uuid", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, strings.Replace(mailboxJSON(""), "0b5e", "0B5E", 1), false, "UUID"},
		{"bad address", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, strings.Replace(mailboxJSON(""), "k7q2m9xw4p@", "k7q2m9xw4p", 1), false, "email"},
		{"local time", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, strings.Replace(mailboxJSON(""), "12:10:00Z", "13:10:00+01:00", 1), false, "UTC"},
		{"null expiry", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, strings.Replace(mailboxJSON(""), `"2025-01-01T12:10:00Z"`, "null", 1), false, "null"},
		{"permanent", "GET", "/v1/mailboxes/current", 200, jsonHdr(), nil, strings.Replace(mailboxJSON(""), "temporary", "permanent", 1), false, "kind"},
		{"CORS header", "GET", "/v1/domains", 200, jsonHdr("Access-Control-Allow-Origin", "*"), nil, `{"data":{"domains":[]}}`, false, "CORS"},
		{"no nosniff", "GET", "/v1/domains", 200, jsonHdr("X-Content-Type-Options", ""), nil, `{"data":{"domains":[]}}`, false, "X-Content-Type-Options"},
		{"cacheable", "GET", "/v1/domains", 200, jsonHdr("Cache-Control", "max-age=60"), nil, `{"data":{"domains":[]}}`, false, "Cache-Control"},
		{"429 without Retry-After", "GET", "/v1/domains", 429, jsonHdr(), nil, errorJSON("RATE_LIMITED", "", requestID), false, "Retry-After"},
		{"creation limit without Retry-After", "POST", "/v1/mailboxes", 429, jsonHdr(), nil, errorJSON("CREATION_RATE_LIMITED", "", requestID), false, "Retry-After"},
		{"Retry-After on 401", "GET", "/v1/messages", 401, jsonHdr("Retry-After", "1"), nil, errorJSON("MAILBOX_SESSION_INVALID", "", requestID), false, "want none"},
		{"invalid uuid without parameter", "GET", sel[:len(sel)-1], 400, jsonHdr(), nil, errorJSON("INVALID_UUID", "", requestID), false, "details.parameter"},
		{"invalid uuid of wrong parameter", "GET", sel[:len(sel)-1], 400, jsonHdr(), nil, errorJSON("INVALID_UUID", `{"parameter":"mailbox_id"}`, requestID), false, "details.parameter"},
		{"too large without limit", "POST", "/v1/mailboxes", 413, jsonHdr(), nil, errorJSON("BODY_TOO_LARGE", "", requestID), false, "limit_bytes"},
		{"404 where 405 is due", "PUT", sel, 404, jsonHdr(), nil, errorJSON("ROUTE_NOT_FOUND", "", requestID), false, "is not documented"},
		{"Allow lists OPTIONS", "PUT", sel, 405, jsonHdr("Allow", "DELETE, GET, OPTIONS"), nil, errorJSON("METHOD_NOT_ALLOWED", "", requestID), false, "Allow"},
		{"405 without Allow", "PUT", sel, 405, jsonHdr(), nil, errorJSON("METHOD_NOT_ALLOWED", "", requestID), false, "Allow"},
		{"404 not JSON", "GET", "/v1/nope", 404, jsonHdr("Content-Type", "text/plain"), nil, "Not Found", false, "text/plain"},
		{"create without cookie", "POST", "/v1/mailboxes", 201, jsonHdr(), nil, mailboxJSON(""), false, "Set-Cookie"},
		{"cookie of another mailbox", "POST", "/v1/mailboxes", 201, jsonHdr(), []string{strings.Replace(scopedCookie, "0b5e", "1b5e", 1)}, mailboxJSON(""), false, "no Set-Cookie named"},
		{"cookie not HttpOnly", "POST", "/v1/mailboxes", 201, jsonHdr(), []string{strings.Replace(scopedCookie, "; HttpOnly", "", 1)}, mailboxJSON(""), false, "HttpOnly"},
		{"cookie with Domain", "POST", mbox, 200, jsonHdr(), []string{sessionSet + "; Domain=example.com"}, mailboxJSON(""), false, "host-only"},
		{"cookie outliving mailbox", "POST", mbox, 200, jsonHdr(), []string{strings.Replace(sessionSet, "13:00:00", "14:00:00", 1)}, mailboxJSON(""), false, "Expires"},
		{"select returns another mailbox", "POST", "/v1/mailboxes/" + messageID + "/select", 200, jsonHdr(), []string{sessionSet}, mailboxJSON(""), false, "want the path's"},
		{"delete keeps session", "DELETE", "/v1/mailboxes/current", 204, noBody, nil, "", false, "Set-Cookie"},
		{"204 with body", "DELETE", sel, 204, noBody, nil, "{}", false, "204 with"},
		{"limit not echoed", "GET", "/v1/messages?limit=5", 200, jsonHdr(), nil, page("", 20, 0, false), false, "pagination.limit"},
		{"has_more on a short page", "GET", "/v1/messages", 200, jsonHdr(), nil, page(summary(messageID, "2025-01-01T12:00:05Z"), 20, 0, true), false, "has_more"},
		{"oldest first", "GET", "/v1/messages", 200, jsonHdr(), nil,
			page(summary(messageID, "2025-01-01T12:00:01Z")+","+summary(mailboxID, "2025-01-01T12:00:05Z"), 20, 0, false), false, "newest first"},
		{"another message", "GET", "/v1/messages/" + mailboxID, 200, jsonHdr(), nil, message("ready", ""), false, "want the path's"},
		{"failed message with body", "GET", sel, 200, jsonHdr(), nil, message("failed", "x"), false, "bodies are empty"},
		{"pending status typo", "GET", sel, 200, jsonHdr(), nil, message("done", ""), false, "/data/message/status"},
		{"document differs", "GET", "/v1/openapi.yaml", 200, jsonHdr("Content-Type", "application/yaml", "Cache-Control", "public, max-age=300"), nil, "openapi: 3.0.3\ninfo: {}\npaths: {}\n", false, "differs"},
		{"document not cacheable", "GET", "/v1/openapi.yaml", 200, jsonHdr("Content-Type", "application/yaml"), nil, string(spec), false, "Cache-Control"},
		{"trailing slash served", "GET", "/v1/messages/", 200, jsonHdr(), nil, page("", 20, 0, false), false, "not documented"},
		{"stream without retry", "GET", "/v1/events", 200, streamHdr, nil, "event: message.received\nid: " + messageID + "\ndata: " + messageOneSum + "\n\n", false, "retry: <1000-5999>"},
		{"stream event not a summary", "GET", "/v1/events", 200, streamHdr, nil, "retry: 3721\n\nevent: message.received\nid: x\ndata: {\"id\":\"x\"}\n\n", false, "MessageSummary"},
		{"stream id differs", "GET", "/v1/events", 200, streamHdr, nil, "retry: 3721\n\nevent: message.received\nid: 1\ndata: " + messageOneSum + "\n\n", false, "event id"},
		{"stream cacheable", "GET", "/v1/events", 200, jsonHdr("Content-Type", "text/event-stream", "X-Accel-Buffering", "no"), nil, "", true, "Cache-Control"},
		{"stream without X-Accel-Buffering", "GET", "/v1/events", 200, jsonHdr("Content-Type", "text/event-stream", "Cache-Control", "no-cache"), nil, "", true, "X-Accel-Buffering"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(tt.method, "http://127.0.0.1:40123"+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Request: req}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			for _, c := range tt.cookies {
				resp.Header.Add("Set-Cookie", c)
			}
			body := []byte(tt.body)
			if tt.nilBody {
				body = nil
			}
			rec := &recorderTB{TB: t}
			checkResponse(rec, req, resp, body)
			got := strings.Join(rec.failures, "\n")
			if got != "" {
				t.Logf("recorded: %s", got)
			}
			switch {
			case tt.wantErr == "" && got != "":
				t.Errorf("valid response failed:\n%s", got)
			case tt.wantErr != "" && got == "":
				t.Errorf("invalid response passed, want a failure mentioning %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(got, tt.wantErr):
				t.Errorf("failure does not mention %q:\n%s", tt.wantErr, got)
			}
		})
	}
}

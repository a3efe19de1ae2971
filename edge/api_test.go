package edge_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage/storagetest"
)

func TestTypicalFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")

	r := u.do("GET", "/domains", "")
	u.want(r, 200, "")
	if got := r.body["data"].(map[string]any)["domains"]; len(got.([]any)) != 2 {
		t.Errorf("domains = %v", got)
	}

	m := u.create(`{"lifetime_minutes": 3}`)
	addr := m["address"].(string)
	if !regexp.MustCompile(`^[a-z0-9]{12,}@(mayfly|inbox)\.test$`).MatchString(addr) {
		t.Errorf("address %q is not a random local part on a configured domain", addr)
	}
	if m["kind"] != "temporary" {
		t.Errorf("kind = %v", m["kind"])
	}
	exp, _ := time.Parse(time.RFC3339, m["expires_at"].(string))
	max, _ := time.Parse(time.RFC3339, m["max_expires_at"].(string))
	if got := max.Sub(exp); got != 57*time.Minute {
		t.Errorf("max_expires_at - expires_at = %v, want 57m for a 3-minute inbox", got)
	}

	// Before select there is no session.
	u.want(u.do("GET", "/messages", ""), 401, "MAILBOX_SESSION_REQUIRED")
	id := m["id"].(string)
	sel := u.do("POST", "/mailboxes/"+id+"/select", "")
	u.want(sel, 200, "")
	if sel.data("mailbox")["id"] != id {
		t.Errorf("select returned %v", sel.data("mailbox"))
	}

	r = u.do("GET", "/messages", "")
	u.want(r, 200, "")
	if items := r.body["data"].(map[string]any)["items"].([]any); len(items) != 0 {
		t.Errorf("items = %v, want empty", items)
	}

	first := e.deliver(addr, "111111")
	second := e.deliver(addr, "222222")
	r = u.do("GET", "/messages?limit=1", "")
	u.want(r, 200, "")
	d := r.body["data"].(map[string]any)
	items := d["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != second.ID.String() {
		t.Errorf("newest first: items = %v", items)
	}
	if !d["pagination"].(map[string]any)["has_more"].(bool) {
		t.Error("has_more = false with two messages and limit 1")
	}
	r = u.do("GET", "/messages?limit=1&offset=1", "")
	if it := r.body["data"].(map[string]any)["items"].([]any); len(it) != 1 || it[0].(map[string]any)["id"] != first.ID.String() {
		t.Errorf("second page = %v", it)
	}

	r = u.do("GET", "/messages/"+first.ID.String(), "")
	u.want(r, 200, "")
	msg := r.data("message")
	for k, want := range map[string]string{
		"from": "Jörg <joerg@example.org>", "subject": "111111", "status": "ready",
		"text_body": "code 111111", "html_body": "<p>code <b>111111</b></p>",
	} {
		if msg[k] != want {
			t.Errorf("message %s = %q, want %q", k, msg[k], want)
		}
	}

	u.want(u.do("DELETE", "/messages/"+first.ID.String(), ""), 204, "")
	u.want(u.do("GET", "/messages/"+first.ID.String(), ""), 404, "MESSAGE_NOT_FOUND")
	u.want(u.do("DELETE", "/messages/"+first.ID.String(), ""), 404, "MESSAGE_NOT_FOUND")

	r = u.do("PATCH", "/mailboxes/current", `{"extension_minutes": 10}`)
	u.want(r, 200, "")
	newExp, _ := time.Parse(time.RFC3339, r.data("mailbox")["expires_at"].(string))
	if got := newExp.Sub(exp); got != 10*time.Minute {
		t.Errorf("extension moved expires_at by %v, want 10m", got)
	}
	u.want(u.do("GET", "/mailboxes/current", ""), 200, "")

	del := u.do("DELETE", "/mailboxes/current", "")
	u.want(del, 204, "")
	if len(del.raw) != 0 {
		t.Errorf("204 body = %q", del.raw)
	}
	// The jar dropped the session: the next call has no cookie at all.
	u.want(u.do("GET", "/messages", ""), 401, "MAILBOX_SESSION_REQUIRED")
	// The scoped cookie is still in the jar but selects nothing.
	u.want(u.do("POST", "/mailboxes/"+id+"/select", ""), 404, "MAILBOX_NOT_FOUND")
	if left := storagetest.Leftovers(t, e.prefix+":{"); len(left) != 0 {
		t.Errorf("mailbox keys left after DELETE: %v", left)
	}
}

func TestSessionEndpointsAfterDestroyAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Keep the old session cookie by hand: the jar would drop it on delete.
	u := e.newUser("")
	u.open()
	cookies := u.hc.Jar.Cookies(mustURL(e.base))
	u.want(u.do("DELETE", "/mailboxes/current", ""), 204, "")
	u.hc.Jar.SetCookies(mustURL(e.base), cookies)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/mailboxes/current", ""},
		{"PATCH", "/mailboxes/current", `{"extension_minutes":1}`},
		{"DELETE", "/mailboxes/current", ""},
		{"GET", "/messages", ""},
		{"GET", "/messages/" + uuid.NewString(), ""},
		{"DELETE", "/messages/" + uuid.NewString(), ""},
	} {
		u.want(u.do(c.method, c.path, c.body), 401, "MAILBOX_SESSION_INVALID")
	}

	// Expiry: a mailbox made with a sub-minute lifetime straight in storage.
	v, m := e.shortLived(600 * time.Millisecond)
	time.Sleep(time.Until(m.ExpiresAt) + 50*time.Millisecond)
	v.want(v.do("GET", "/messages", ""), 401, "MAILBOX_SESSION_INVALID")
	v.want(v.do("GET", "/mailboxes/current", ""), 401, "MAILBOX_SESSION_INVALID")
	v.want(v.do("POST", "/mailboxes/"+m.ID.String()+"/select", ""), 404, "MAILBOX_NOT_FOUND")

	// A forged session value is invalid, not a server error.
	w := e.newUser("")
	for _, val := range []string{"x", "abc.def", strings.Repeat("a", 20) + "." + strings.Repeat("A", 43), m.Tag() + "." + strings.Repeat("A", 43)} {
		w.hc.Jar.SetCookies(mustURL(e.base), []*http.Cookie{{Name: "service_session", Value: val, Path: "/v1"}})
		w.want(w.do("GET", "/messages", ""), 401, "MAILBOX_SESSION_INVALID")
	}
}

func TestJarsAreSeparateBoundaries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.newUser(""), e.newUser("")
	am := alice.open()
	bob.open()
	msg := e.deliver(am["address"].(string), "secret")

	// Bob knows Alice's mailbox id, address and message id: none grants access.
	bob.want(bob.do("GET", "/messages/"+msg.ID.String(), ""), 404, "MESSAGE_NOT_FOUND")
	bob.want(bob.do("DELETE", "/messages/"+msg.ID.String(), ""), 404, "MESSAGE_NOT_FOUND")
	bob.want(bob.do("POST", "/mailboxes/"+am["id"].(string)+"/select", ""), 401, "MAILBOX_CREDENTIAL_REQUIRED")
	if r := bob.do("GET", "/messages", ""); len(r.body["data"].(map[string]any)["items"].([]any)) != 0 {
		t.Errorf("bob sees alice's mail: %s", r.raw)
	}
	// A scoped cookie of the right name with another mailbox's value.
	bm := bob.create("{}")
	var bobScoped string
	for _, c := range bob.hc.Jar.Cookies(mustURL(e.base)) {
		if c.Name == "mayfly_"+strings.ReplaceAll(bm["id"].(string), "-", "") {
			bobScoped = c.Value
		}
	}
	bob.hc.Jar.SetCookies(mustURL(e.base), []*http.Cookie{{Name: "mayfly_" + strings.ReplaceAll(am["id"].(string), "-", ""), Value: bobScoped, Path: "/v1"}})
	bob.want(bob.do("POST", "/mailboxes/"+am["id"].(string)+"/select", ""), 401, "MAILBOX_CREDENTIAL_INVALID")
	alice.want(alice.do("GET", "/messages/"+msg.ID.String(), ""), 200, "")

	// Selecting another of one's own mailboxes switches the jar's current inbox.
	cm := alice.create("{}")
	alice.want(alice.do("POST", "/mailboxes/"+cm["id"].(string)+"/select", ""), 200, "")
	if r := alice.do("GET", "/mailboxes/current", ""); r.data("mailbox")["id"] != cm["id"] {
		t.Errorf("current = %v, want the newly selected %v", r.data("mailbox")["id"], cm["id"])
	}
	alice.want(alice.do("GET", "/messages/"+msg.ID.String(), ""), 404, "MESSAGE_NOT_FOUND")
}

func TestCookieAttributes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.CookieInsecure = false; c.CookiePrefix = "acme" })
	u := e.newUser("")
	r := u.do("POST", "/mailboxes", "{}")
	u.want(r, 201, "")
	m := r.data("mailbox")
	wantName := "acme_" + strings.ReplaceAll(m["id"].(string), "-", "")
	check := func(setCookie, name string) {
		t.Helper()
		if !strings.HasPrefix(setCookie, name+"=") {
			t.Errorf("Set-Cookie %q, want name %s", redact(setCookie), name)
		}
		lower := strings.ToLower(setCookie)
		for _, attr := range []string{"; httponly", "; samesite=lax", "; path=/v1", "; secure", "; expires="} {
			if !strings.Contains(lower, attr) {
				t.Errorf("Set-Cookie %q lacks %q", redact(setCookie), attr)
			}
		}
		if strings.Contains(lower, "domain=") {
			t.Errorf("Set-Cookie %q is not host-only", redact(setCookie))
		}
	}
	check(r.header.Get("Set-Cookie"), wantName)
	max, _ := time.Parse(time.RFC3339, m["max_expires_at"].(string))
	for _, c := range r.resp.Cookies() {
		if c.Expires.After(max.Add(time.Second)) {
			t.Errorf("cookie expires %v after max_expires_at %v", c.Expires, max)
		}
	}
	// The jar will not send Secure cookies over plain HTTP: send it by hand.
	val := r.resp.Cookies()[0].Value
	s := u.do("POST", "/mailboxes/"+m["id"].(string)+"/select", "", "Cookie", wantName+"="+val)
	u.want(s, 200, "")
	check(s.header.Get("Set-Cookie"), "service_session")
	sess := s.resp.Cookies()[0].Value
	d := u.do("DELETE", "/mailboxes/current", "", "Cookie", "service_session="+sess)
	u.want(d, 204, "")
	clear := strings.ToLower(d.header.Get("Set-Cookie"))
	if !strings.HasPrefix(clear, "service_session=;") || !strings.Contains(clear, "max-age=0") || !strings.Contains(clear, "path=/v1") {
		t.Errorf("clearing Set-Cookie = %q", clear)
	}
}

func redact(setCookie string) string {
	name, rest, _ := strings.Cut(setCookie, "=")
	_, attrs, _ := strings.Cut(rest, ";")
	return name + "=<redacted>;" + attrs
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) {
		// Many bad creations from one test: the creation limit is not under test here.
		r.CreatePerMinute, r.CreatePerHour, r.CreatePerDay = 1000, 1000, 1000
	})
	u := e.newUser("")
	for _, tt := range []struct{ body, code string }{
		{"", "INVALID_JSON"},
		{"   ", "INVALID_JSON"},
		{"{", "INVALID_JSON"},
		{"null", "INVALID_JSON"},
		{"[]", "INVALID_JSON"},
		{`"x"`, "INVALID_JSON"},
		{"{} {}", "INVALID_JSON"},
		{`{"lifetime_minutes": 5} x`, "INVALID_JSON"},
		{`{"x": 1}`, "UNKNOWN_FIELD"},
		{`{"Lifetime_Minutes": 5}`, "UNKNOWN_FIELD"},
		{`{"lifetime_minutes": 5, "kind": "permanent"}`, "UNKNOWN_FIELD"},
		{`{"lifetime_minutes": "5"}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": 1.5}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": 5e0}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": null}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": true}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": 0}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": 11}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": -1}`, "INVALID_FIELD"},
		{`{"lifetime_minutes": 99999999999999999999}`, "INVALID_FIELD"},
		// A key twice: parsers disagree on which wins, so neither does.
		{`{"lifetime_minutes":"x","lifetime_minutes":1}`, "INVALID_JSON"},
		{`{"lifetime_minutes":1,"lifetime_minutes":1}`, "INVALID_JSON"},
		{`{"x":1,"x":2}`, "INVALID_JSON"},
	} {
		r := u.do("POST", "/mailboxes", tt.body)
		if r.status != 400 || r.code() != tt.code {
			t.Errorf("POST /mailboxes %q = %d %s, want 400 %s", tt.body, r.status, r.code(), tt.code)
		}
	}
	for _, body := range []string{"{}", `{"lifetime_minutes": 1}`, `{"lifetime_minutes": 10}`, ` { "lifetime_minutes" : 7 } `} {
		u.want(u.do("POST", "/mailboxes", body), 201, "")
	}

	u.open()
	for _, tt := range []struct{ body, code string }{
		{"", "INVALID_JSON"},
		{"{}", "INVALID_FIELD"},
		{`{"extension_minutes": 0}`, "INVALID_FIELD"},
		{`{"extension_minutes": 11}`, "INVALID_FIELD"},
		{`{"extension_minutes": "1"}`, "INVALID_FIELD"},
		{`{"extension_minutes": 1, "lifetime_minutes": 1}`, "UNKNOWN_FIELD"},
		{`{"extension_minutes": 1}{`, "INVALID_JSON"},
		{`{"extension_minutes": 1, "extension_minutes": 2}`, "INVALID_JSON"},
	} {
		r := u.do("PATCH", "/mailboxes/current", tt.body)
		if r.status != 400 || r.code() != tt.code {
			t.Errorf("PATCH %q = %d %s, want 400 %s", tt.body, r.status, r.code(), tt.code)
		}
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=-1", "limit=abc", "limit=1.5", "limit=", "limit=+5",
		"offset=-1", "offset=abc", "offset=", "offset=1e3", "limit=99999999999999999999",
		"offset=9223372036854775808", "offset=99999999999999999999"} {
		r := u.do("GET", "/messages?"+q, "")
		if r.status != 400 || r.code() != "INVALID_PAGINATION" {
			t.Errorf("GET /messages?%s = %d %s, want 400 INVALID_PAGINATION", q, r.status, r.code())
		}
	}
	for _, q := range []string{"limit=1", "limit=100", "offset=0", "offset=1000000", "limit=20&offset=40",
		"offset=2147483648", "limit=100&offset=9223372036854775807"} {
		u.want(u.do("GET", "/messages?"+q, ""), 200, "")
	}
	for _, id := range []string{"not-a-uuid", "123", "{" + uuid.NewString() + "}", "urn:uuid:" + uuid.NewString(),
		strings.ReplaceAll(uuid.NewString(), "-", ""), uuid.NewString() + "0"} {
		for _, m := range []string{"GET", "DELETE"} {
			r := u.do(m, "/messages/"+id, "")
			if r.status != 400 || r.code() != "INVALID_UUID" {
				t.Errorf("%s /messages/%s = %d %s, want 400 INVALID_UUID", m, id, r.status, r.code())
			}
		}
		if r := u.do("POST", "/mailboxes/"+id+"/select", ""); r.status != 400 || r.code() != "INVALID_UUID" {
			t.Errorf("select %s = %d %s, want 400 INVALID_UUID", id, r.status, r.code())
		}
	}
	u.want(u.do("GET", "/messages/"+uuid.NewString(), ""), 404, "MESSAGE_NOT_FOUND")
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	pad := func(n int) string { return `{"lifetime_minutes": 5` + strings.Repeat(" ", n) + `}` }
	u.want(u.do("POST", "/mailboxes", pad(16<<10-30)), 201, "")
	for _, n := range []int{16 << 10, 40 << 10} {
		r := u.do("POST", "/mailboxes", pad(n))
		u.want(r, 413, "BODY_TOO_LARGE")
	}
	// 70 KiB is past the transport bound too (4 × the limit): fasthttp
	// refuses it before routing; it is still answered 413 in the envelope,
	// and the connection drains the body before it closes, so the answer is
	// read, not reset (TestBodyTooLargeIsReadable).
	req, _ := http.NewRequest("POST", e.base+"/mailboxes", strings.NewReader(pad(70<<10)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", randomIP())
	resp, err := u.hc.Do(req)
	if err != nil {
		t.Fatalf("70 KiB body: %v, want a 413", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkResponse(t, req, resp, raw)
	if resp.StatusCode != 413 || !strings.Contains(string(raw), `"BODY_TOO_LARGE"`) {
		t.Errorf("70 KiB body: %d %s, want 413 BODY_TOO_LARGE", resp.StatusCode, raw)
	}
	u.open()
	u.want(u.do("PATCH", "/mailboxes/current", `{"extension_minutes": 1`+strings.Repeat(" ", 20<<10)+`}`), 413, "BODY_TOO_LARGE")
}

// TestOutsideV1Hint: a request to a path outside /v1 (a base URL without
// it) gets 404 ROUTE_NOT_FOUND whose message names /v1 and the path to try,
// also in details; a missing path under /v1 gets the plain 404.
func TestOutsideV1Hint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	root := strings.TrimSuffix(e.base, "/v1")
	for _, tc := range []struct{ method, path, try string }{
		{"GET", "/mailboxes/current", "/v1/mailboxes/current"},
		{"POST", "/mailboxes", "/v1/mailboxes"},
		{"GET", "/messages/0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93", "/v1/messages/0b5e2a7c-3f1d-4e8a-9c6b-7d2e1f0a4b93"},
		{"GET", "/", "/v1/openapi.yaml"},
		{"GET", "/v2/mailboxes", "/v1/openapi.yaml"},
		{"DELETE", "/mailboxes", "/v1/openapi.yaml"}, // not an endpoint under /v1 either
	} {
		e.base = root
		r := u.do(tc.method, tc.path, "")
		e.base = root + "/v1"
		u.want(r, 404, "ROUTE_NOT_FOUND")
		msg, _ := r.body["error"].(map[string]any)["message"].(string)
		details, _ := r.body["error"].(map[string]any)["details"].(map[string]any)
		if !strings.Contains(msg, "the API is under /v1") || !strings.Contains(msg, "try "+tc.try) {
			t.Errorf("%s %s: message %q, want the /v1 hint and %q", tc.method, tc.path, msg, tc.try)
		}
		if details["api_prefix"] != "/v1" || details["try"] != tc.try {
			t.Errorf("%s %s: details %v, want api_prefix /v1 and try %q", tc.method, tc.path, details, tc.try)
		}
	}
	r := u.do("GET", "/nope", "")
	u.want(r, 404, "ROUTE_NOT_FOUND")
	if strings.Contains(string(r.raw), "try") {
		t.Errorf("GET /v1/nope: %s, want no hint (already under /v1)", r.raw)
	}
}

func TestRoutingErrorsAndNoCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	for _, p := range []string{"/nope", "/messages/", "/mailboxes/current/x", "/../domains"} {
		u.want(u.do("GET", p, ""), 404, "ROUTE_NOT_FOUND")
	}
	r := u.do("PUT", "/mailboxes/current", "{}")
	u.want(r, 405, "METHOD_NOT_ALLOWED")
	if got := r.header.Get("Allow"); got != "DELETE, GET, PATCH" {
		t.Errorf("Allow = %q", got)
	}
	if got := u.do("GET", "/mailboxes", "").header.Get("Allow"); got != "POST" {
		t.Errorf("Allow for /mailboxes = %q, want POST", got)
	}
	pre := u.do("OPTIONS", "/messages", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "GET")
	u.want(pre, 405, "METHOD_NOT_ALLOWED")
	get := u.do("GET", "/domains", "", "Origin", "https://evil.example")
	for _, rr := range []*result{pre, get} {
		for k := range rr.header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("CORS header %s sent", k)
			}
		}
	}
	doc := u.do("GET", "/openapi.yaml", "")
	u.want(doc, 200, "")
	if !strings.Contains(string(doc.raw), "openapi: 3.0") {
		t.Errorf("openapi.yaml body starts %q", doc.raw[:min(40, len(doc.raw))])
	}
}

func TestRequestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the spec's 8 per second
	var u *user
	var codes map[int]int
	e.inOneWindow(300*time.Millisecond, func(ip string) {
		u = e.newUser(ip)
		codes = burst(t, u, 14)
	})
	if codes[200] != 8 || codes[429] != 6 {
		t.Errorf("statuses = %v, want 8×200 and 6×429", codes)
	}
	// Another client is not affected, and the next second admits again.
	e.newUser("203.0.113.8").want(e.newUser("203.0.113.8").do("GET", "/domains", ""), 200, "")
	time.Sleep(time.Until(e.serverNow().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	u.want(u.do("GET", "/domains", ""), 200, "")
}

// burst sends n GET /domains at once as u and counts the statuses; a 429
// must be RATE_LIMITED with Retry-After 1.
func burst(t *testing.T, u *user, n int) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := u.do("GET", "/domains", "")
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
			if r.status == 429 && (r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") != "1") {
				t.Errorf("429 %s Retry-After %q", r.code(), r.header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	return codes
}

func TestCreationRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the spec's 5 per minute
	u := e.newUser("203.0.113.20")
	e.awaitWindow(time.Minute, 10*time.Second)
	// Failed attempts count: two bad bodies, then three good ones.
	u.want(u.do("POST", "/mailboxes", "{"), 400, "INVALID_JSON")
	u.want(u.do("POST", "/mailboxes", `{"lifetime_minutes": 0}`), 400, "INVALID_FIELD")
	for range 3 {
		u.create("{}")
	}
	r := u.do("POST", "/mailboxes", "{}")
	u.want(r, 429, "CREATION_RATE_LIMITED")
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" || len(ra) > 2 {
		t.Errorf("Retry-After = %q, want the seconds left in the minute", ra)
	}
	var body struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.raw, &body); err != nil || body.Error.Details["window"] != "minute" {
		t.Errorf("details = %v (%v), want window minute: %s", body.Error.Details, err, r.raw)
	}
	e.newUser("203.0.113.21").create("{}")
}

func TestActiveInboxLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) {
		// The creation windows would refuse first; this test is about the active cap.
		r.CreatePerMinute, r.CreatePerHour, r.CreatePerDay, r.RequestsPerSecond = 100, 100, 100, 100
	})
	u := e.newUser("203.0.113.30")
	var ids []string
	for range 5 {
		ids = append(ids, u.create("{}")["id"].(string))
	}
	u.want(u.do("POST", "/mailboxes", "{}"), 429, "ACTIVE_INBOX_LIMIT")
	u.want(u.do("POST", "/mailboxes/"+ids[0]+"/select", ""), 200, "")
	u.want(u.do("DELETE", "/mailboxes/current", ""), 204, "")
	u.create("{}")
	u.want(u.do("POST", "/mailboxes", "{}"), 429, "ACTIVE_INBOX_LIMIT")
}

func TestGlobalCreationLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) { r.GlobalCreatePerMinute = 3 })
	e.awaitWindow(time.Minute, 10*time.Second)
	for i := range 3 {
		e.newUser("203.0.113." + string(rune('1'+i))).create("{}")
	}
	u := e.newUser("203.0.113.9")
	u.want(u.do("POST", "/mailboxes", "{}"), 429, "GLOBAL_CREATION_LIMIT")
}

func TestDependencyUnavailableAndRecovery(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	setup := newEnvOn(t, rs.client())
	u := setup.newUser("")
	u.open()
	_, u = setup.tight(t, u, func(c *edge.Config, _ *ratelimit.Config) { c.RedisTimeout = 500 * time.Millisecond })
	rs.Kill()
	start := time.Now()
	// A read whose rate-limit check cannot reach Redis is served (fails
	// open): GET /domains needs nothing else, so it still answers.
	u.want(u.do("GET", "/domains", ""), 200, "")
	for _, c := range []struct{ method, path string }{{"GET", "/messages"}, {"POST", "/mailboxes"}, {"DELETE", "/messages/00000000-0000-4000-8000-000000000000"}} {
		r := u.do(c.method, c.path, "{}")
		u.want(r, 503, "DEPENDENCY_UNAVAILABLE")
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
		}
		if strings.Contains(strings.ToLower(string(r.raw)), "redis") || strings.Contains(string(r.raw), "dial") {
			t.Errorf("error body leaks internals: %s", r.raw)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("four requests against a dead Redis took %v", d)
	}
	rs.Start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// The restarted Redis is empty: the session is gone (401), but
		// Redis answers again.
		r := u.do("GET", "/messages", "")
		if r.status == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after Redis came back: %d %s", r.status, r.raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestRequestProtection(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	e := newEnvOn(t, rs.client(), func(c *edge.Config, _ *ratelimit.Config) {
		c.MaxInFlight = 1
		c.RedisTimeout = 5 * time.Second
	})
	u := e.newUser("")
	u.want(u.do("GET", "/domains", ""), 200, "")
	// The next request's rate-limit count (a write) waits on Redis, in
	// flight; CLIENT PAUSE WRITE still answers INFO, which shows it held.
	rs.Redis("CLIENT", "PAUSE", "1500", "WRITE")
	done := make(chan *result)
	go func() { done <- u.do("GET", "/domains", "") }()
	rs.awaitBlocked()
	r := u.do("GET", "/domains", "")
	u.want(r, 503, "REQUEST_PROTECTION")
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	u.want(<-done, 200, "")
}

func TestExtensionStopsAtMax(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	m := u.open()
	max := m["max_expires_at"].(string)
	var last string
	for range 6 {
		r := u.do("PATCH", "/mailboxes/current", `{"extension_minutes": 10}`)
		u.want(r, 200, "")
		last = r.data("mailbox")["expires_at"].(string)
	}
	if last != max {
		t.Errorf("expires_at after 60 requested minutes = %s, want max %s", last, max)
	}
	r := u.do("PATCH", "/mailboxes/current", `{"extension_minutes": 1}`)
	u.want(r, 200, "")
	if got := r.data("mailbox")["expires_at"]; got != max {
		t.Errorf("grant at the cap moved expires_at to %v", got)
	}
}

func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.ReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.base, "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a request, then nothing: the server must not wait forever.
	if _, err := conn.Write([]byte("GET /v1/domains HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", time.Since(start))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("slow client held the connection for %v", d)
	}
}

func TestRedisTimeoutIs503(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	setup := newEnvOn(t, rs.client())
	u := setup.newUser("")
	u.open()
	_, u = setup.tight(t, u, func(c *edge.Config, _ *ratelimit.Config) { c.RedisTimeout = 300 * time.Millisecond })
	rs.Redis("CLIENT", "PAUSE", "2000", "ALL") // Redis holds every command: slow, not down
	start := time.Now()
	r := u.do("GET", "/messages", "")
	u.want(r, 503, "DEPENDENCY_UNAVAILABLE")
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("answer took %v with a 300 ms Redis budget", d)
	}
	time.Sleep(2 * time.Second)
	u.want(u.do("GET", "/messages", ""), 200, "")
}

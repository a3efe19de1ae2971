package edge_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
)

// accessLines are the access-log lines of e's log, by request id.
func accessLines(t *testing.T, e *env) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for line := range strings.Lines(e.logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" {
			out[m["request_id"].(string)] = m
		}
	}
	return out
}

// A client's request_id, from a 401's body, finds the request in the access
// log: route pattern, method, status, duration and client IP; and no cookie
// value, sent or set, is ever in the log.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t) // the default: errors
		u := e.newUser("198.51.100.7")
		m := u.open()
		// The mailbox-scoped and session cookies the jar now holds.
		var secrets []string
		for _, c := range u.hc.Jar.Cookies(mustURL(e.base + "/")) {
			secrets = append(secrets, c.Value)
		}
		if len(secrets) != 2 {
			t.Fatalf("%d cookies in the jar, want 2", len(secrets))
		}
		forged := "zzzzzzzzzzzzzzzzzzzzzz.c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1sb2dnZWQtMTIzNDU2Nzg5MA"
		secrets = append(secrets, forged)
		r := u.do("GET", "/messages/"+m["id"].(string), "", "Cookie", "service_session="+forged)
		u.want(r, 401, "MAILBOX_SESSION_INVALID")
		id, _ := r.body["request_id"].(string)
		line, ok := accessLines(t, e)[id]
		if !ok {
			t.Fatalf("request_id %s of a 401 not in the access log:\n%s", id, e.logs.String())
		}
		for k, want := range map[string]any{"route": "GET /messages/{id}", "method": "GET", "status": 401.0, "ip": "198.51.100.7", "level": "INFO"} {
			if line[k] != want {
				t.Errorf("access line %s = %v, want %v (%v)", k, line[k], want, line)
			}
		}
		if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("duration_ms = %v", line["duration_ms"])
		}
		// The 201 and 200 of open are not errors: not logged.
		for _, l := range accessLines(t, e) {
			if s := l["status"].(float64); s < 400 {
				t.Errorf("errors mode logged a %v: %v", s, l)
			}
		}
		logs := e.logs.String()
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("a cookie value is in the log")
			}
		}
		if strings.Contains(logs, m["id"].(string)) {
			t.Errorf("the mailbox id is in the log: routes are logged as patterns")
		}
	})
	t.Run("all", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.AccessLog = edge.AccessLogAll })
		u := e.newUser(randomIP())
		u.open()
		lines := accessLines(t, e)
		var statuses []float64
		for _, l := range lines {
			statuses = append(statuses, l["status"].(float64))
		}
		if len(lines) != 2 {
			t.Errorf("all mode: %d lines (%v) for a create and a select, want 2", len(lines), statuses)
		}
		for _, c := range u.hc.Jar.Cookies(mustURL(e.base + "/")) {
			if strings.Contains(e.logs.String(), c.Value) {
				t.Errorf("a Set-Cookie value is in the log")
			}
		}
	})
	t.Run("off and rate", func(t *testing.T) {
		t.Parallel()
		off := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.AccessLog = edge.AccessLogOff })
		off.newUser(randomIP()).do("GET", "/messages", "")
		if n := len(accessLines(t, off)); n != 0 {
			t.Errorf("off: %d access lines", n)
		}
		capped := newEnv(t, func(c *edge.Config, r *ratelimit.Config) { c.AccessLogRate = 3; r.RequestsPerSecond = 1000 })
		u := capped.newUser(randomIP())
		for range 10 {
			u.do("GET", "/messages", "")
		}
		if n := len(accessLines(t, capped)); n < 3 || n > 6 {
			t.Errorf("AccessLogRate 3: %d lines for 10 errors in about a second, want 3 (6 if the second turned)", n)
		}
	})
}

package client

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestJar pins the cookie rules the jar implements: one host, path match,
// Secure only over https, Max-Age and Expires, and a save/restore round trip.
func TestJar(t *testing.T) {
	base, _ := url.Parse("http://api.example:8080/v1")
	j := newJar(base)
	// A fixed instant, and every jar below reads it through now: no
	// expiry in this test is judged by the real clock.
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	j.now = func() time.Time { return now }
	u := func(s string) *url.URL { p, _ := url.Parse(s); return p }
	j.SetCookies(u("http://api.example:8080/v1/mailboxes"), []*http.Cookie{
		{Name: "service_session", Value: "s", Path: "/v1"},
		{Name: "p_abc", Value: "scoped", Path: "/v1", Expires: now.Add(time.Hour)},
		{Name: "secure", Value: "x", Path: "/v1", Secure: true},
		{Name: "other_path", Value: "x", Path: "/v2"},
		{Name: "dead", Value: "x", Path: "/v1", Expires: now.Add(-time.Second)},
	})
	j.SetCookies(u("http://elsewhere.example/v1"), []*http.Cookie{{Name: "foreign", Value: "x", Path: "/"}})
	names := func(cs []*http.Cookie) map[string]bool {
		m := map[string]bool{}
		for _, c := range cs {
			m[c.Name] = true
		}
		return m
	}
	got := names(j.Cookies(u("http://api.example:8080/v1/messages")))
	if !got["service_session"] || !got["p_abc"] || got["secure"] || got["other_path"] || got["dead"] || got["foreign"] || len(got) != 2 {
		t.Fatalf("cookies for /v1/messages over http: %v", got)
	}
	if got := names(j.Cookies(u("https://api.example/v1/x"))); !got["secure"] {
		t.Errorf("https: %v, want the Secure cookie too", got)
	}
	if got := j.Cookies(u("http://api.example:8080/v10")); len(got) != 0 {
		t.Errorf("/v10 matched path /v1: %v", got)
	}
	if got := j.Cookies(u("http://elsewhere.example/v1")); len(got) != 0 {
		t.Errorf("another host: %v", got)
	}
	// Max-Age=0 (as DELETE /mailboxes/current sends) clears the session.
	j.SetCookies(u("http://api.example:8080/v1/mailboxes/current"), []*http.Cookie{{Name: "service_session", MaxAge: -1}})
	if names(j.Cookies(u("http://api.example:8080/v1/messages")))["service_session"] {
		t.Error("the session survived Max-Age=0")
	}
	saved := j.saved()
	k := newJar(base)
	k.now = j.now // the restored jar reads the same clock as the one that saved
	k.restore(saved)
	if got := names(k.Cookies(u("http://api.example:8080/v1/messages"))); !got["p_abc"] || len(got) != 1 {
		t.Errorf("restored jar: %v", got)
	}
	now = now.Add(2 * time.Hour)
	if got := j.Cookies(u("http://api.example:8080/v1/messages")); len(got) != 0 {
		t.Errorf("after the expiry: %v", got)
	}
}

// TestSavedCookieJSON: the shared state format's cookie (clients/SCENARIOS.md,
// "Save and restore"): expires in RFC 3339 for a persistent cookie, omitted
// for a session cookie, secure omitted when false; and it reads back.
func TestSavedCookieJSON(t *testing.T) {
	exp := time.Date(2026, 11, 25, 8, 37, 20, 500, time.UTC)
	for _, tc := range []struct {
		c    SavedCookie
		want string
	}{
		{SavedCookie{Name: "service_session", Value: "v", Path: "/"}, `{"name":"service_session","value":"v","path":"/"}`},
		{SavedCookie{Name: "mf_x", Value: "w", Path: "/v1", Expires: exp, Secure: true},
			`{"name":"mf_x","value":"w","path":"/v1","expires":"2026-11-25T08:37:20Z","secure":true}`},
	} {
		raw, err := json.Marshal(tc.c)
		if err != nil || string(raw) != tc.want {
			t.Fatalf("Marshal = %s, %v; want %s", raw, err, tc.want)
		}
		var back SavedCookie
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if want := tc.c; back.Name != want.Name || back.Secure != want.Secure || !back.Expires.Equal(want.Expires.Truncate(time.Second)) {
			t.Fatalf("round trip = %+v; want %+v", back, want)
		}
	}
	// A state from another client: a session cookie without expires, no
	// secure, no gone.
	var st State
	if err := json.Unmarshal([]byte(`{"version":1,"base":"http://h/v1","mailbox":{"id":"i","address":"a@b","kind":"k",`+
		`"expires_at":"2026-11-25T08:37:20.123456Z","max_expires_at":"2026-11-25T09:27:20Z"},`+
		`"cookies":[{"name":"service_session","value":"s","path":"/"}],"seen":["m1","m2"]}`), &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || len(st.Cookies) != 1 || !st.Cookies[0].Expires.IsZero() || len(st.Seen) != 2 || st.Gone {
		t.Fatalf("state = %+v", st)
	}
}

package client

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// jar is the cookie jar of one Inbox. It holds the cookies of one host, the
// service's, host-only as the API issues them, and can list them with their
// attributes so an inbox can be saved and restored (net/http/cookiejar
// cannot). It honours Path, Expires, Max-Age and Secure.
type jar struct {
	host string // the service's host, lower case
	mu   sync.Mutex
	all  map[string]*http.Cookie // by name (one path per name, as the API uses)
	now  func() time.Time
}

func newJar(base *url.URL) *jar {
	return &jar{host: strings.ToLower(base.Hostname()), all: map[string]*http.Cookie{}, now: wallClock}
}

// wallClock is the client's one reading of the local calendar: cookie expiry
// and Retry-After dates. Durations (backoff, stream timeouts) use the
// monotonic clock directly. The package's tests move wallClock decades away
// from today (clock_test.go), so a test that mixes a literal date with the
// real clock fails on every run, not on the day the date goes by.
var wallClock = time.Now

// SetCookies implements http.CookieJar.
func (j *jar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	if strings.ToLower(u.Hostname()) != j.host {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	for _, c := range cookies {
		if c.Name == "" {
			continue
		}
		kept := *c
		if kept.Path == "" || kept.Path[0] != '/' {
			kept.Path = defaultPath(u.Path)
		}
		switch {
		case c.MaxAge < 0:
			delete(j.all, c.Name)
			continue
		case c.MaxAge > 0:
			kept.Expires = now.Add(time.Duration(c.MaxAge) * time.Second)
		}
		if !kept.Expires.IsZero() && !kept.Expires.After(now) {
			delete(j.all, c.Name)
			continue
		}
		kept.MaxAge, kept.Raw, kept.Unparsed = 0, "", nil
		j.all[c.Name] = &kept
	}
}

// Cookies implements http.CookieJar.
func (j *jar) Cookies(u *url.URL) []*http.Cookie {
	if strings.ToLower(u.Hostname()) != j.host {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	var out []*http.Cookie
	for name, c := range j.all {
		if !c.Expires.IsZero() && !c.Expires.After(now) {
			delete(j.all, name)
			continue
		}
		if c.Secure && u.Scheme != "https" || !pathMatch(u.Path, c.Path) {
			continue
		}
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}

// saved lists the live cookies with their attributes.
func (j *jar) saved() []SavedCookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []SavedCookie
	for _, c := range j.all {
		if c.Expires.IsZero() || c.Expires.After(j.now()) {
			out = append(out, SavedCookie{Name: c.Name, Value: c.Value, Path: c.Path, Expires: c.Expires, Secure: c.Secure})
		}
	}
	return out
}

func (j *jar) restore(cs []SavedCookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range cs {
		j.all[c.Name] = &http.Cookie{Name: c.Name, Value: c.Value, Path: c.Path, Expires: c.Expires, Secure: c.Secure}
	}
}

// names lists the cookie names held.
func (j *jar) names() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for n := range j.all {
		out = append(out, n)
	}
	return out
}

// defaultPath is RFC 6265 §5.1.4's default-path of a request path.
func defaultPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// pathMatch is RFC 6265 §5.1.4's path-match.
func pathMatch(reqPath, cookiePath string) bool {
	if reqPath == "" {
		reqPath = "/"
	}
	if reqPath == cookiePath {
		return true
	}
	if !strings.HasPrefix(reqPath, cookiePath) {
		return false
	}
	return strings.HasSuffix(cookiePath, "/") || reqPath[len(cookiePath)] == '/'
}

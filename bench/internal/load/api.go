package load

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// Inbox is a selected mailbox: its address and the Cookie header that reads
// it (the service_session cookie). The cookie is a secret: tools pass it on
// and never print it.
type Inbox struct {
	ID      string
	Address string
	Cookie  string
}

// NewHTTPClient returns a client for many concurrent connections to one host.
func NewHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// OpenInbox creates and selects an inbox through the API as client ip (sent
// in X-Forwarded-For), with a cookie jar of its own, and returns it.
func OpenInbox(c *http.Client, api, ip string) (Inbox, error) {
	jar, _ := cookiejar.New(nil)
	c2 := *c
	c2.Jar = jar
	var created struct {
		Data struct{ Mailbox struct{ ID, Address string } }
	}
	if err := call(&c2, "POST", api+"/mailboxes", ip, "{}", 201, &created); err != nil {
		return Inbox{}, fmt.Errorf("create: %w", err)
	}
	box := created.Data.Mailbox
	if err := call(&c2, "POST", api+"/mailboxes/"+box.ID+"/select", ip, "", 200, nil); err != nil {
		return Inbox{}, fmt.Errorf("select: %w", err)
	}
	u, _ := url.Parse(api + "/messages")
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "service_session" {
			return Inbox{ID: box.ID, Address: box.Address, Cookie: ck.Name + "=" + ck.Value}, nil
		}
	}
	return Inbox{}, fmt.Errorf("select: no service_session cookie (is MAYFLY_COOKIE_SECURE=false?)")
}

// Get sends a GET as client ip with cookie and decodes a 200 JSON answer into
// out (if not nil).
func Get(c *http.Client, url, ip, cookie string, out any) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Forwarded-For", ip)
	req.Header.Set("Cookie", cookie)
	return do(c, req, 200, out)
}

func call(c *http.Client, method, url, ip, body string, want int, out any) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Forwarded-For", ip)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(c, req, want, out)
}

func do(c *http.Client, req *http.Request, want int, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

package topology_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/deploy/topology"
)

// user is one API client with its own cookie jar, talking through haproxy.
type user struct {
	t    testing.TB
	base string
	http *http.Client
}

func newUser(t testing.TB, base string) *user {
	jar, _ := cookiejar.New(nil)
	return &user{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

// do sends a request and decodes the JSON body into out (when not nil).
func (u *user) do(method, path, body string, out any) int {
	u.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, u.base+path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := u.http.Do(req)
	if err != nil {
		u.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			u.t.Fatalf("%s %s: %d %q: %v", method, path, res.StatusCode, b, err)
		}
	}
	return res.StatusCode
}

type mailboxReply struct {
	Data struct {
		Mailbox struct{ ID, Address string }
	}
}

type listReply struct {
	Data struct {
		Items []struct{ ID, Subject, Status string }
	}
}

// open creates and selects an inbox and returns its address.
func (u *user) open() string {
	u.t.Helper()
	var m mailboxReply
	if code := u.do("POST", "/mailboxes", "{}", &m); code != 201 {
		u.t.Fatalf("POST /mailboxes = %d", code)
	}
	if code := u.do("POST", "/mailboxes/"+m.Data.Mailbox.ID+"/select", "", nil); code != 200 {
		u.t.Fatalf("select = %d", code)
	}
	return m.Data.Mailbox.Address
}

func (u *user) list() listReply {
	u.t.Helper()
	var l listReply
	if code := u.do("GET", "/messages?limit=100", "", &l); code != 200 {
		u.t.Fatalf("GET /messages = %d", code)
	}
	return l
}

// events opens GET /events and sends the ids of message.received events on
// the returned channel until the stream ends (then the channel closes).
func (u *user) events() (<-chan string, func()) {
	u.t.Helper()
	req, _ := http.NewRequest("GET", u.base+"/events", nil)
	c := &http.Client{Jar: u.http.Jar}
	res, err := c.Do(req)
	if err != nil {
		u.t.Fatalf("GET /events: %v", err)
	}
	if res.StatusCode != 200 {
		u.t.Fatalf("GET /events = %d", res.StatusCode)
	}
	ids := make(chan string, 1000)
	go func() {
		defer close(ids)
		readEvents(res.Body, func(id string) { ids <- id })
	}()
	return ids, func() { res.Body.Close() }
}

// readEvents reads an event stream until it ends and calls onMessage with
// the id of every message.received event.
func readEvents(body io.Reader, onMessage func(id string)) {
	sc := bufio.NewScanner(body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: ") && event == "message.received":
			onMessage(strings.TrimPrefix(line, "id: "))
		case line == "":
			event = ""
		}
	}
}

func send(addr, to, subject string) error {
	msg := "From: drill@example.org\r\nTo: " + to + "\r\nSubject: " + subject + "\r\n\r\nbody of " + subject + "\r\n"
	return smtp.SendMail(addr, nil, "drill@example.org", []string{to}, []byte(msg))
}

// smtpGreeting dials addr from the loopback address from and returns the
// first reply line.
func smtpGreeting(t *testing.T, addr, from string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("greeting from %s: %v", from, err)
	}
	_, _ = c.Write([]byte("QUIT\r\n"))
	return line
}

// The conformance path of the API and SMTP, through haproxy against two edge
// and two ingest nodes on a replicated cluster: nothing a client sees
// depends on which node answers.
func TestThroughHAProxy(t *testing.T) {
	// The API rate is raised so that haproxy's per-source cap, not the edge's
	// 8 requests a second, is what "api connections per source" meets.
	tp := topology.Start(t, "MAYFLY_SMTP_CONN_PER_MINUTE=3", "MAYFLY_RATE_REQUESTS_PER_SECOND=1000")

	t.Run("api and smtp", func(t *testing.T) {
		u := newUser(t, tp.HTTPURL)
		addr := u.open()
		ids, stop := u.events()
		defer stop()
		// Several requests: haproxy spreads them over both edges, and every
		// one of them sees the same session.
		for i := range 3 { // MAYFLY_SMTP_CONN_PER_MINUTE=3 for this client
			if err := send(tp.SMTPAddr, addr, "hello "+string(rune('a'+i))); err != nil {
				t.Fatalf("SMTP through haproxy: %v", err)
			}
		}
		for i := range 3 {
			select {
			case <-ids:
			case <-time.After(10 * time.Second):
				t.Fatalf("event %d of 3 not received", i+1)
			}
		}
		l := u.list()
		if len(l.Data.Items) != 3 {
			t.Fatalf("%d messages, want 3", len(l.Data.Items))
		}
		var msg struct {
			Data struct{ Message struct{ Subject string } }
		}
		if code := u.do("GET", "/messages/"+l.Data.Items[0].ID, "", &msg); code != 200 || msg.Data.Message.Subject != "hello c" {
			t.Fatalf("GET /messages/{id} = %d %+v", code, msg)
		}
		if code := u.do("DELETE", "/mailboxes/current", "", nil); code != 204 {
			t.Fatalf("DELETE = %d", code)
		}
		if code := u.do("GET", "/messages", "", nil); code != 401 {
			t.Fatalf("after delete GET /messages = %d, want 401", code)
		}
		// Both edges served this client (the haproxy log names the server).
		for _, n := range []string{"edges/edge1", "edges/edge2"} {
			if !strings.Contains(tp.Logs("haproxy"), n) {
				t.Errorf("haproxy never used %s", n)
			}
		}
	})

	// haproxy sends PROXY v2, so the ingest nodes count connections per real
	// client: 127.0.0.2 reaches its limit of 3 a minute while 127.0.0.3 is
	// still greeted. Without the PROXY protocol both would be haproxy's
	// 127.0.0.1 and share one limit.
	t.Run("smtp limits per real client", func(t *testing.T) {
		// The limit counts in fixed minutes of the Redis clock (this
		// machine's): four connections across a minute's turn would be
		// four firsts of two windows.
		if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 10*time.Second {
			time.Sleep(left + 50*time.Millisecond)
		}
		for i := range 3 {
			if got := smtpGreeting(t, tp.SMTPAddr, "127.0.0.2"); !strings.HasPrefix(got, "220") {
				t.Fatalf("127.0.0.2 connection %d: %q, want 220", i+1, got)
			}
		}
		if got := smtpGreeting(t, tp.SMTPAddr, "127.0.0.2"); !strings.HasPrefix(got, "421 4.7.0") {
			t.Fatalf("127.0.0.2 4th connection: %q, want 421 4.7.0", got)
		}
		if got := smtpGreeting(t, tp.SMTPAddr, "127.0.0.3"); !strings.HasPrefix(got, "220") {
			t.Fatalf("127.0.0.3: %q, want 220: the limit must be per real client", got)
		}
	})

	// haproxy caps what one source IP holds (MAYFLY_LB_HTTP_CONNS_PER_IP,
	// 100): past it, a request is answered 429 in the API's envelope and its
	// connection closed, while another source is served. Before the cap one
	// IP holding ~8,000 idle keep-alive connections filled haproxy's
	// maxconn and starved everyone (the flood drill measures that).
	t.Run("api connections per source", func(t *testing.T) {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for i := range 100 {
			c, res := rawGet(t, tp.HTTPURL, "127.0.0.4", "/domains")
			if res.StatusCode != 200 {
				t.Fatalf("127.0.0.4 connection %d: %d, want 200", i+1, res.StatusCode)
			}
			held = append(held, c)
		}
		c, res := rawGet(t, tp.HTTPURL, "127.0.0.4", "/domains")
		held = append(held, c)
		assertHAProxyEnvelope(t, res, 429, "RATE_LIMITED")
		if c, res := rawGet(t, tp.HTTPURL, "127.0.0.5", "/domains"); res.StatusCode != 200 {
			t.Errorf("127.0.0.5 while 127.0.0.4 holds 100: %d, want 200", res.StatusCode)
		} else {
			c.Close()
		}
	})

	// Last: with every edge down, haproxy's own 503 is the API's envelope
	// with Retry-After, not its HTML page.
	t.Run("no edge up", func(t *testing.T) {
		for _, e := range tp.Edges {
			tp.Kill(e.PID)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, res := rawGet(t, tp.HTTPURL, "127.0.0.6", "/domains")
			c.Close()
			if res.StatusCode == 503 {
				assertHAProxyEnvelope(t, res, 503, "DEPENDENCY_UNAVAILABLE")
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("edges killed 10 s ago, still %d", res.StatusCode)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// rawGet sends GET path through haproxy on a new connection from the
// loopback address from and reads the answer (its body into res.Body as
// bytes); the connection stays open for the caller.
func rawGet(t *testing.T, base, from, path string) (net.Conn, *haproxyAnswer) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	hostPort := strings.TrimPrefix(strings.TrimSuffix(base, "/v1"), "http://")
	c, err := d.Dial("tcp", hostPort)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /v1"+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", path, from, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c, &haproxyAnswer{Response: res, body: body}
}

type haproxyAnswer struct {
	*http.Response
	body []byte
}

// assertHAProxyEnvelope checks an answer of haproxy's own: the API's error
// envelope with a request id, JSON, and Retry-After.
func assertHAProxyEnvelope(t *testing.T, res *haproxyAnswer, status int, code string) {
	t.Helper()
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(res.body, &env); err != nil {
		t.Fatalf("%d %q is not the JSON envelope: %v", res.StatusCode, res.body, err)
	}
	if res.StatusCode != status || env.Error.Code != code || env.Error.Message == "" {
		t.Errorf("got %d %+v, want %d %s", res.StatusCode, env, status, code)
	}
	if id := res.Header.Get("X-Request-ID"); len(id) != 16 || id != env.RequestID {
		t.Errorf("request_id %q, X-Request-ID %q: want the same 16 hex digits", env.RequestID, id)
	}
	if res.Header.Get("Content-Type") != "application/json" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v: want JSON with nosniff", res.Header)
	}
	if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds", res.Header.Get("Retry-After"))
	}
}

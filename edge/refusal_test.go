package edge_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
)

// rawExchange writes raw on a new connection to e and reads one response;
// closed reports whether the server then closed the connection.
func rawExchange(t *testing.T, e *env, raw string) (res *http.Response, body []byte, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.base, "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no HTTP response to %q: %v", raw, err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	// Anything more on the connection? A keep-alive server waits (timeout);
	// a closing one ends it (EOF).
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return res, body, false
	}
	return res, body, true
}

// envelope checks that body is the API's error envelope with code and a
// request id equal to the X-Request-ID header.
func assertEnvelope(t *testing.T, res *http.Response, body []byte, status int, code string) {
	t.Helper()
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%d body %q is not the JSON envelope: %v", res.StatusCode, body, err)
	}
	if res.StatusCode != status || env.Error.Code != code || env.Error.Message == "" {
		t.Errorf("got %d %+v, want %d %s", res.StatusCode, env, status, code)
	}
	if id := res.Header.Get("X-Request-ID"); id == "" || id != env.RequestID {
		t.Errorf("request_id %q, X-Request-ID %q: want the same, non-empty", env.RequestID, id)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("headers %v: want JSON with nosniff", res.Header)
	}
}

// Every answer to something that parsed as HTTP is the API's envelope, and
// a request whose framing is ambiguous closes the connection.
func TestRefusalsUseTheEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("Transfer-Encoding and Content-Length", func(t *testing.T) {
		res, body, closed := rawExchange(t, e, "POST /v1/mailboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
		assertEnvelope(t, res, body, 400, "MALFORMED_REQUEST")
		if !closed {
			t.Error("connection kept open after an ambiguous request (RFC 9112 §6.1)")
		}
	})
	t.Run("malformed request line", func(t *testing.T) {
		res, body, closed := rawExchange(t, e, "GET\r\nHost: x\r\n\r\n")
		assertEnvelope(t, res, body, 400, "MALFORMED_REQUEST")
		if !closed {
			t.Error("connection kept open after an unreadable request")
		}
	})
	t.Run("headers too large", func(t *testing.T) {
		res, body, _ := rawExchange(t, e, "GET /v1/domains HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 20<<10)+"\r\n\r\n")
		assertEnvelope(t, res, body, 431, "HEADERS_TOO_LARGE")
	})
	t.Run("multipart content type is read as the raw body", func(t *testing.T) {
		res, body, _ := rawExchange(t, e, "POST /v1/mailboxes HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n"+
			"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
		if res.StatusCode != 201 {
			t.Errorf("POST with a multipart content type and a JSON body = %d %s, want 201", res.StatusCode, body)
		}
		res, body, _ = rawExchange(t, e, "POST /v1/mailboxes HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n"+
			"Content-Length: 5\r\nConnection: close\r\n\r\n--x--")
		assertEnvelope(t, res, body, 400, "INVALID_JSON")
	})
}

// postWhole sends a request as Python's http.client and urllib do (no
// Expect: 100-continue): the headers and the whole body, written before
// anything is read, then reads the answer. err is what such a client sees
// when the server resets the connection.
func postWhole(t *testing.T, e *env, ip, path string, bodyLen int) (*http.Response, []byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.base, "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	head := "POST /v1" + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Forwarded-For: " + ip +
		"\r\nContent-Length: " + strconv.Itoa(bodyLen) + "\r\n\r\n"
	body := []byte(`{"lifetime_minutes": 5` + strings.Repeat(" ", max(0, bodyLen-23)) + `}`)[:bodyLen]
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return nil, nil, fmt.Errorf("writing the body: %w", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer: %w", err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer's body: %w", err)
	}
	return res, raw, nil
}

// Any body size gets the JSON 413, also from a client that writes its whole
// body before it reads: bodies past the transport bound used to get a reset
// (0 of 20 readable at 4 and 10 MiB) because the connection closed with the
// unread body in its receive buffer.
func TestBodyTooLargeIsReadable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) { r.RequestsPerSecond = 1000 })
	var readable int
	for i := range 20 {
		size := 4 << 20
		if i%2 == 1 {
			size = 10 << 20
		}
		// PATCH-like routes and creation take different paths through the
		// routes; both must answer.
		path := "/mailboxes"
		if i%4 >= 2 {
			path = "/mailboxes/" + "00000000-0000-4000-8000-000000000000" + "/select"
		}
		res, body, err := postWhole(t, e, randomIP(), path, size)
		if err != nil {
			t.Errorf("%d MiB POST %s: %v", size>>20, path, err)
			continue
		}
		assertEnvelope(t, res, body, 413, "BODY_TOO_LARGE")
		readable++
	}
	if readable != 20 {
		t.Errorf("%d of 20 oversize requests got a readable 413", readable)
	}
}

// The real client the issue names: Python's urllib, which sends no Expect.
func TestBodyTooLargePythonClient(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) { r.RequestsPerSecond = 1000 })
	const script = `
import json, sys, urllib.request, urllib.error
ok = 0
for size in (4 << 20, 10 << 20) * 5:
    req = urllib.request.Request(sys.argv[1] + "/mailboxes", data=b" " * size, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=15)
    except urllib.error.HTTPError as e:
        if e.code == 413 and json.load(e)["error"]["code"] == "BODY_TOO_LARGE":
            ok += 1
    except Exception as e:
        print(size, repr(e))
print(ok)
`
	out, err := exec.Command(python, "-c", script, e.base).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, "\n10") && got != "10" {
		t.Errorf("urllib, 10 POSTs of 4 and 10 MiB: readable 413s:\n%s\nwant 10", got)
	}
}

// A body refused before it is read still counts: against the per-IP
// request rate, and for POST /mailboxes against the creation windows
// (docs/api.md, Limits). It used to count nothing: 12 oversize POSTs from one IP,
// then a normal POST still got 201.
func TestOversizeBodiesCount(t *testing.T) {
	t.Parallel()
	t.Run("creation windows", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) { r.RequestsPerSecond = 1000 })
		ip := randomIP()
		codes := map[string]int{}
		for range 12 {
			res, body, err := postWhole(t, e, ip, "/mailboxes", 100<<10)
			if err != nil {
				t.Fatal(err)
			}
			var env struct{ Error struct{ Code string } }
			_ = json.Unmarshal(body, &env)
			codes[strconv.Itoa(res.StatusCode)+" "+env.Error.Code]++
		}
		// A bad body is answered as such, counted even past the limit
		// (ratelimit.ReserveCreation).
		if codes["413 BODY_TOO_LARGE"] != 12 {
			t.Errorf("12 oversize POST /mailboxes: %v, want 12 × 413", codes)
		}
		u := e.newUser(ip)
		u.want(u.do("POST", "/mailboxes", "{}"), 429, "CREATION_RATE_LIMITED")
	})
	t.Run("request rate", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(_ *edge.Config, r *ratelimit.Config) { r.RequestsPerSecond = 4 })
		var r *result
		var u *user
		e.inOneWindow(500*time.Millisecond, func(ip string) {
			for range 4 {
				if _, _, err := postWhole(t, e, ip, "/mailboxes/00000000-0000-4000-8000-000000000000/select", 100<<10); err != nil {
					t.Fatal(err)
				}
			}
			u = e.newUser(ip)
			r = u.do("GET", "/domains", "")
		})
		u.want(r, 429, "RATE_LIMITED")
	})
}

// TestSilentConnectionClosed: a connection on which no request comes within
// ReadTimeout (an HTTP client's spare connection) is closed without an
// answer. An answer would be read as the answer to the next request the
// client sends on it (Go logs "Unsolicited response on idle HTTP channel").
func TestSilentConnectionClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.ReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.base, "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	got, err := io.ReadAll(conn)
	if len(got) != 0 {
		t.Fatalf("an idle new connection got %q, want no bytes", got)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was still open after %v", time.Since(start))
	}
}

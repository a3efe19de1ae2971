package edge_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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

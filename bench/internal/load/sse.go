package load

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Stream is one open GET /events, read over a connection of its own with one
// goroutine (so that 10,000 of them stay cheap for the load generator).
type Stream struct {
	conn net.Conn
	body io.ReadCloser
	// Retry is the stream's last retry: field (0 until it sent one): how
	// long the official clients wait before they reconnect after it ends.
	Retry time.Duration
}

// StatusError is a GET /events that did not answer 200.
type StatusError struct {
	Status     int
	RetryAfter time.Duration // its Retry-After (0: none)
	Body       string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET /events: status %d: %s", e.Status, e.Body)
}

// Event is one server-sent event.
type Event struct {
	Type string
	Data string
}

// OpenStream opens the event stream of the inbox whose session cookie is
// given, as client ip, and returns once the server answered 200. A non-nil
// local binds the connection's source address (more streams than one
// address has ports: the edge then sees that address as the client).
func OpenStream(api, cookie, ip string, local *net.TCPAddr, timeout time.Duration) (*Stream, error) {
	u, err := url.Parse(api + "/events")
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: timeout}
	if local != nil {
		d.LocalAddr = local
	}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest("GET", u.String(), nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cookie", cookie)
	req.Header.Set("X-Forwarded-For", ip)
	conn.SetDeadline(time.Now().Add(timeout))
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		conn.Close()
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, &StatusError{Status: resp.StatusCode, RetryAfter: time.Duration(ra) * time.Second, Body: string(b)}
	}
	conn.SetDeadline(time.Time{})
	return &Stream{conn: conn, body: resp.Body}, nil
}

// Read calls on for every event until the stream ends or fails; it returns
// the reason (io.EOF for a clean end).
func (s *Stream) Read(on func(Event)) error {
	sc := bufio.NewScanner(s.body)
	sc.Buffer(make([]byte, 0, 512), 1<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" || ev.Data != "" {
				on(ev)
			}
			ev = Event{}
		case strings.HasPrefix(line, "event:"):
			ev.Type = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			ev.Data = strings.TrimSpace(line[len("data:"):])
		case strings.HasPrefix(line, "retry:"):
			if ms, err := strconv.Atoi(strings.TrimSpace(line[len("retry:"):])); err == nil {
				s.Retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// Close ends the stream.
func (s *Stream) Close() error { return s.conn.Close() }

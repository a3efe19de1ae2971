package smtp_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"
)

// countingListener hands out connections that count the server's writes.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestReplyOneWrite: every reply, a multi-line one too, reaches the
// connection in one write (Mayfly patch 4).
func TestReplyOneWrite(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	s := smtp.NewServer(new(backend))
	s.Domain = "localhost"
	s.AllowInsecureAuth = true
	s.EnableSMTPUTF8 = true
	s.EnableBINARYMIME = true
	s.EnableDSN = true
	go s.Serve(countingListener{l, &writes})
	defer s.Close()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	// reply reads one whole reply and returns its lines.
	reply := func() []string {
		var lines []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read reply: %v (so far %q)", err, lines)
			}
			lines = append(lines, line)
			if len(line) < 4 || line[3] != '-' {
				return lines
			}
		}
	}
	// The count goes up before the bytes leave, so once a reply is read
	// its writes are counted.
	var last int64
	for _, step := range []struct {
		send      string
		wantLines int // at least
	}{
		{"", 1}, // the greeting
		{"EHLO localhost\r\n", 5},
		{"MAIL FROM:<root@nsa.gov>\r\n", 1},
		{"NOOP\r\n", 1},
		{"HELP\r\n", 1},
	} {
		if step.send != "" {
			if _, err := io.WriteString(c, step.send); err != nil {
				t.Fatal(err)
			}
		}
		lines := reply()
		if len(lines) < step.wantLines {
			t.Fatalf("%q: reply %q, want at least %d lines", step.send, lines, step.wantLines)
		}
		now := writes.Load()
		if got, want := now-last, int64(1); got != want {
			t.Errorf("%q: %d writes for the %d-line reply %q, want %d", strings.TrimSpace(step.send), got, len(lines), lines, want)
		}
		last = now
	}
}

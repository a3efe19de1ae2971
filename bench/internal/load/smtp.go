package load

import (
	"fmt"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// SMTPConn is one SMTP client connection (net/smtp) from a chosen source
// address.
type SMTPConn struct {
	c    *smtp.Client
	conn net.Conn
	sent int
}

// DialSMTP connects to addr from src (nil: any), reads the greeting and says
// EHLO.
func DialSMTP(addr string, src *net.TCPAddr, timeout time.Duration) (*SMTPConn, error) {
	d := net.Dialer{Timeout: timeout}
	if src != nil {
		d.LocalAddr = src
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(timeout))
	host, _, _ := net.SplitHostPort(addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.Hello("load.bench.example"); err != nil {
		c.Close()
		return nil, err
	}
	return &SMTPConn{c: c, conn: conn}, nil
}

// Send sends one message and returns when the server answered DATA (the
// 250). A second and later message on the connection is preceded by RSET.
func (s *SMTPConn) Send(from, to string, msg []byte, timeout time.Duration) error {
	s.conn.SetDeadline(time.Now().Add(timeout))
	if s.sent > 0 {
		if err := s.c.Reset(); err != nil {
			return err
		}
	}
	s.sent++
	if err := s.c.Mail(from); err != nil {
		return err
	}
	if err := s.c.Rcpt(to); err != nil {
		return err
	}
	w, err := s.c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	return w.Close()
}

// Close says QUIT and closes the connection.
func (s *SMTPConn) Close() error {
	s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	err := s.c.Quit()
	s.conn.Close()
	return err
}

// Abort closes the connection without QUIT (after an error).
func (s *SMTPConn) Abort() { s.conn.Close() }

// Message returns a multipart/alternative message of about size bytes (at
// least 1 KiB), text and HTML, with the subject given.
func Message(subject string, size int) []byte {
	const boundary = "mayfly-bench-boundary"
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load <load@bench.example>\r\nTo: inbox\r\nSubject: %s\r\n", subject)
	fmt.Fprintf(&b, "Date: Sat, 21 Nov 2026 12:00:00 +0000\r\nMessage-ID: <%s@bench.example>\r\n", subject)
	fmt.Fprintf(&b, "MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=%q\r\n\r\n", boundary)
	header := b.Len()
	part := max(size-header-300, 200) / 2
	line := "Your verification code is 123456. It expires in ten minutes, so use it soon.\r\n"
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", boundary)
	for n := 0; n < part; n += len(line) {
		b.WriteString(line)
	}
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n", boundary)
	for n := 0; n < part; n += len(line) + 7 {
		b.WriteString("<p>" + strings.TrimSuffix(line, "\r\n") + "</p>\r\n")
	}
	fmt.Fprintf(&b, "</body></html>\r\n--%s--\r\n", boundary)
	return []byte(b.String())
}

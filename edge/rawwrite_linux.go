package edge

import (
	"net"
	"syscall"
)

// socketOf is the socket under conn, for writes that must not wait
// (writeNow): conn is a TCP connection of this process, reached through
// the listener's wrapper only. Nil for any other connection: never through
// TLS, whose bytes are not the socket's.
func socketOf(conn net.Conn) syscall.RawConn {
	if g, ok := conn.(*guardedConn); ok {
		conn = g.Conn
	}
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow writes what of p the socket's send buffer takes at once and
// returns how much that was: it never waits, and so needs no deadline. The
// socket is non-blocking (the runtime's poller owns it): a full buffer
// answers EAGAIN. An error (the peer went, the connection is closed, a
// deadline set earlier has passed) stops it short too; the caller's
// ordinary write then meets it and reports it as net.Conn does.
func writeNow(rc syscall.RawConn, p []byte) int {
	n := 0
	_ = rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, err := syscall.Write(int(fd), p[n:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil || m <= 0 {
				break
			}
			n += m
		}
		return true // never wait for the poller
	})
	return n
}

package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// tcpPair is a connection of a listener of this process (the node's side,
// as a stream holds it) and its client, both with small socket buffers so
// that a write of a megabyte waits for the client.
func tcpPair(t *testing.T) (node, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	node, client = s.(*net.TCPConn), c.(*net.TCPConn)
	t.Cleanup(func() { node.Close(); client.Close() })
	if err := node.SetWriteBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	return node, client
}

// deadlineCount counts the write deadlines set on its connection.
type deadlineCount struct {
	net.Conn
	n atomic.Int32
}

func (c *deadlineCount) SetWriteDeadline(t time.Time) error {
	c.n.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

// leftNoDeadline fails the test if conn still has a write deadline: one
// that has passed by now fails a plain write at once.
func leftNoDeadline(t *testing.T, conn net.Conn, timeout time.Duration) {
	t.Helper()
	time.Sleep(timeout + 100*time.Millisecond)
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatalf("a plain write after the stream's write: %v; want none: the write left its deadline armed", err)
	}
}

// TestDeadlineConnLeavesNoDeadline: a write the socket takes at once sets
// no deadline, and one that waited for the client clears its own, so no
// timer of an idle stream fires after its heartbeat (issue 39).
func TestDeadlineConnLeavesNoDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	t.Run("taken at once", func(t *testing.T) {
		t.Parallel()
		node, client := tcpPair(t)
		go io.Copy(io.Discard, client)
		counted := &deadlineCount{Conn: node}
		c := &deadlineConn{conn: counted, raw: socketOf(node), timeout: timeout}
		if n, err := c.Write([]byte(": ping\n\n")); n != 8 || err != nil {
			t.Fatalf("Write = %d, %v; want 8, nil", n, err)
		}
		if got := counted.n.Load(); runtime.GOOS == "linux" && got != 0 {
			t.Errorf("the write set a write deadline %d times; want none: the socket took it at once", got)
		}
		leftNoDeadline(t, node, timeout)
	})
	t.Run("waited for the client", func(t *testing.T) {
		t.Parallel()
		node, client := tcpPair(t)
		// A small receive buffer slows a reading client to a crawl on
		// loopback (a few KiB per delayed ack): this client reads, late.
		if err := client.SetReadBuffer(1 << 20); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(timeout / 3) // the sockets' buffers fill first
			io.Copy(io.Discard, client)
		}()
		c := &deadlineConn{conn: node, raw: socketOf(node), timeout: 10 * timeout}
		p := make([]byte, 1<<20)
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
		}
		c.timeout = timeout // what leftNoDeadline waits for
		leftNoDeadline(t, node, 10*timeout)
	})
}

// TestDeadlineConnStalledClient: a client that takes nothing fails a write
// after the write timeout, whether the socket took part of it at once or
// not (a stalled client: the stream ends and is counted).
func TestDeadlineConnStalledClient(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	node, _ := tcpPair(t)
	c := &deadlineConn{conn: node, raw: socketOf(node), timeout: timeout}
	for i := range 2 { // the first write fills the socket's buffer, the second finds it full
		start := time.Now()
		n, err := c.Write(make([]byte, 1<<20))
		took := time.Since(start)
		if !errors.Is(err, os.ErrDeadlineExceeded) || n >= 1<<20 {
			t.Fatalf("write %d to a stalled client = %d, %v; want fewer bytes and os.ErrDeadlineExceeded", i, n, err)
		}
		if took < timeout || took > timeout+3*time.Second {
			t.Errorf("write %d to a stalled client failed after %v; want the write timeout, %v", i, took, timeout)
		}
	}
}

// TestDeadlineConnInterrupt: interrupt ends a write the client holds up at
// once, fails the writes after it, and after resume a write goes through
// again although interrupt's deadline has passed (finish's last words).
func TestDeadlineConnInterrupt(t *testing.T) {
	t.Parallel()
	node, client := tcpPair(t)
	c := &deadlineConn{conn: node, raw: socketOf(node), timeout: time.Minute}
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 1<<20))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // the write waits for the client
	c.interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, errStreamInterrupted) {
			t.Fatalf("the interrupted write: %v; want errStreamInterrupted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write the client holds up is still under way 5 s after interrupt")
	}
	if _, err := c.Write([]byte("0\r\n\r\n")); !errors.Is(err, errStreamInterrupted) {
		t.Fatalf("a write after interrupt: %v; want errStreamInterrupted", err)
	}
	go io.Copy(io.Discard, client)
	c.resume()
	c.endWithin(5 * time.Second)
	if n, err := c.Write([]byte("0\r\n\r\n")); n != 5 || err != nil {
		t.Fatalf("a write after resume = %d, %v; want 5, nil", n, err)
	}
}

//go:build !unix

package client_test

import (
	"net"
	"testing"
)

// heldPort picks a free loopback port; listen listens on it. Unlike the
// unix version, nothing holds the port in between.
func heldPort(t *testing.T) (addr string, listen func() (net.Listener, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	return addr, func() (net.Listener, error) { return net.Listen("tcp", addr) }
}

// holdPort does nothing here: the port of a closed server stays free.
func holdPort(*testing.T, string) {}

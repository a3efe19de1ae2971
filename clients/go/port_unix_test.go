//go:build unix

package client_test

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// heldPort binds a loopback TCP port without listening on it: connections
// to it are refused, and no other socket can take it, until listen starts
// listening on it. (A port picked, closed and listened on again later may
// be taken in between by another test's listener.)
func heldPort(t *testing.T) (addr string, listen func() (net.Listener, error)) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "held port")
	t.Cleanup(func() { f.Close() })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	return addr, func() (net.Listener, error) {
		if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
			return nil, err
		}
		return net.FileListener(f)
	}
}

//go:build unix

package client_test

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// bound binds a TCP socket to 127.0.0.1:port (0: one the kernel picks)
// without listening on it: connections to it are refused, and no other
// socket can take the port, while the socket lives (until the test ends).
// SO_REUSEADDR lets it take a port whose closed connections linger in
// TIME_WAIT.
func bound(t *testing.T, port int) (fd int, f *os.File, addr string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	f = os.NewFile(uintptr(fd), "bound port")
	t.Cleanup(func() { f.Close() })
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind 127.0.0.1:%d: %v", port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, f, net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// heldPort is a loopback port that refuses connections until listen starts
// listening on it. (A port picked, closed and listened on again later may
// be taken in between by another test's listener.)
func heldPort(t *testing.T) (addr string, listen func() (net.Listener, error)) {
	t.Helper()
	fd, f, addr := bound(t, 0)
	return addr, func() (net.Listener, error) {
		if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
			return nil, err
		}
		return net.FileListener(f)
	}
}

// holdPort keeps the loopback port of addr, a server just closed, refusing
// connections until the test ends: no other test's listener takes it.
func holdPort(t *testing.T, addr string) {
	t.Helper()
	bound(t, int(netip.MustParseAddrPort(addr).Port()))
}

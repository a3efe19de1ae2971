// Package localnet gives tests many client addresses on one machine: a
// fresh IPv6 /48 routed to the loopback device, and a dialer that connects
// from any address inside it. A server on [::1] then sees each connection
// come from the address the test chose, as it would see clients of one
// network on the Internet.
//
// It needs root (CAP_NET_ADMIN) to add the route. Without it the test fails
// when CI=true, so a green CI run always exercised it, and is skipped
// otherwise. It deliberately changes no sysctl: the dialer sets IP_FREEBIND
// on its own sockets instead of net.ipv6.ip_nonlocal_bind for the machine.
package localnet

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Block6 routes a /48 of the unique local range (fd00::/8, never on the
// Internet) to the loopback device until the test ends, and returns it.
// Each call gets a block of its own, so tests run in parallel.
func Block6(t testing.TB) netip.Prefix {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("localnet: adding a local IPv6 route needs root")
		}
		t.Skip("localnet: adding a local IPv6 route needs root")
	}
	for range 20 {
		var a [16]byte
		a[0], a[1], a[2] = 0xfd, 0x6d, 0x66 // fd6d:66xx:xxxx::/48
		n := rand.Uint32()
		a[3], a[4], a[5] = byte(n>>16), byte(n>>8), byte(n)
		block := netip.PrefixFrom(netip.AddrFrom16(a), 48)
		out, err := exec.Command("ip", "-6", "route", "add", "local", block.String(), "dev", "lo").CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "File exists") {
				continue
			}
			t.Fatalf("localnet: ip -6 route add local %s dev lo: %v: %s", block, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "-6", "route", "del", "local", block.String(), "dev", "lo").CombinedOutput(); err != nil {
				t.Errorf("localnet: ip -6 route del local %s dev lo: %v: %s", block, err, out)
			}
		})
		return block
	}
	t.Fatal("localnet: no free /48 after 20 tries")
	return netip.Prefix{}
}

// Addr is the address of block with n in its last 64 bits and subnet in
// the 16 bits after a /48 (so Addr(b, s, n) for a fixed s are addresses of
// one /64).
func Addr(block netip.Prefix, subnet uint16, n uint64) netip.Addr {
	a := block.Masked().Addr().As16()
	a[6], a[7] = byte(subnet>>8), byte(subnet)
	for i := range 8 {
		a[15-i] = byte(n >> (8 * i))
	}
	return netip.AddrFrom16(a)
}

// Dialer connects from local, an address of a Block6 block (or any local
// address), without the machine allowing non-local binds.
func Dialer(local netip.Addr) *net.Dialer {
	return &net.Dialer{
		Timeout:   5 * time.Second,
		LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)),
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, syscall.IP_FREEBIND, 1)
			}); err != nil {
				return err
			}
			return serr
		},
	}
}

//go:build !linux

package edge

import (
	"net"
	"syscall"
)

// socketOf: writes that do not wait need Linux (rawwrite_linux.go);
// elsewhere every stream write has its deadline.
func socketOf(net.Conn) syscall.RawConn { return nil }

func writeNow(syscall.RawConn, []byte) int { return 0 }

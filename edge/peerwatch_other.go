//go:build !linux

package edge

import "net"

// watchPeer needs epoll (peerwatch_linux.go); elsewhere streams poll.
func watchPeer(net.Conn, func()) (func(), bool) { return nil, false }

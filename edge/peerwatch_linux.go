package edge

import (
	"net"
	"sync"
	"syscall"
)

// peerWatch tells an idle event stream that its client closed or reset the
// connection, without a timer or a blocked read per stream: every stream's
// socket is in one epoll set (of this process, apart from the Go runtime's
// own) for EPOLLRDHUP and EPOLLHUP only, and one goroutine waits on it.
// A stream costs no wake-up until its peer goes; the kernel then reports it
// at once. Readable data (an event-stream client sends none) is not watched.
type peerWatch struct {
	epfd int
	mu   sync.Mutex
	next uint64
	byID map[uint64]func()
}

var (
	watchOnce sync.Once
	watcher   *peerWatch // nil when epoll could not be set up
)

func sharedPeerWatch() *peerWatch {
	watchOnce.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		watcher = &peerWatch{epfd: fd, byID: map[uint64]func(){}}
		go watcher.run()
	})
	return watcher
}

// watchPeer calls gone once when the peer of conn closes or resets it. It
// returns the function that stops watching, to be called before conn is
// closed, and false when conn cannot be watched (not a socket of this
// process); the caller then polls.
func watchPeer(conn net.Conn, gone func()) (unwatch func(), ok bool) {
	w := sharedPeerWatch()
	if w == nil {
		return nil, false
	}
	rc := rawConn(conn)
	if rc == nil {
		return nil, false
	}
	w.mu.Lock()
	w.next++
	id := w.next
	w.byID[id] = gone
	w.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR | syscall.EPOLLONESHOT,
		Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	var added error
	if err := rc.Control(func(fd uintptr) { added = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev) }); err != nil || added != nil {
		w.forget(id)
		return nil, false
	}
	return func() {
		w.forget(id)
		_ = rc.Control(func(fd uintptr) { _ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	}, true
}

func (w *peerWatch) forget(id uint64) {
	w.mu.Lock()
	delete(w.byID, id)
	w.mu.Unlock()
}

func (w *peerWatch) run() {
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.epfd, events, -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			gone := w.byID[id]
			delete(w.byID, id) // one-shot: the stream ends
			w.mu.Unlock()
			if gone != nil {
				gone()
			}
		}
	}
}

// rawConn is the socket under conn (through the listener's wrapper and
// TLS), or nil.
func rawConn(conn net.Conn) syscall.RawConn {
	for {
		if sc, ok := conn.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		}
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		conn = nc.NetConn()
	}
}

package ingest

import (
	"errors"
	"net"
	"sync"
	"time"
)

// listener hands go-smtp only the connections admit let through. Its own
// accept loop starts one admit goroutine per connection.
type listener struct {
	net.Listener
	srv   *Server
	conns chan *conn
	errc  chan error
	done  chan struct{}
	once  sync.Once
}

func newListener(ln net.Listener, s *Server) *listener {
	l := &listener{Listener: ln, srv: s, conns: make(chan *conn), errc: make(chan error, 1), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *listener) run() {
	var delay time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			// Out of file descriptors and the like: back off like net/http
			// instead of spinning or giving up.
			if !errors.Is(err, net.ErrClosed) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.srv.log.Warn("smtp accept", "err", err, "retry_in", delay.String())
				time.Sleep(delay)
				continue
			}
			l.errc <- err
			return
		}
		delay = 0
		go l.srv.admit(nc, l)
	}
}

// Accept returns the next admitted connection.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // every later call fails the same way
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the accept loop; it is safe to call more than once.
func (l *listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

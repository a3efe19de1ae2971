package ingest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// lingerTime bounds how long a refused connection is drained before it is
// closed.
const lingerTime = 500 * time.Millisecond

// maxLingering caps the connections refused before their session (421 at
// accept: rate, per-IP or node session cap) that linger at once on a node.
// They hold no session slot, so without a cap a flood of refused
// connections would hold a descriptor and a goroutine each for up to
// lingerTime outside every other cap. Past it a refused connection is
// closed right after its 421; the client may then miss the reply if it
// pipelined (a reset), which a flood deserves.
const maxLingering = 64

// conn is an admitted connection. It holds the session slot until closed,
// clamps every read deadline to the session's end (SessionTimeout; for
// commands also the start of Shutdown), and can hang up right after the
// reply that refuses the session.
type conn struct {
	net.Conn
	srv     *Server
	ip      string       // client key (ratelimit.ClientKey)
	network netip.Prefix // its network (ratelimit.NetworkPrefix)
	relay   bool         // in Config.Relays: the relay rules apply

	// firstMail is the decision on the connection's first transaction,
	// counted with the connection (see admit); counted says it is unused.
	// Only the session's goroutine touches them after admit.
	firstMail error
	counted   bool
	// lease is the connection's share of its transaction window
	// (takeMail): hits admitted without asking Redis again, until the
	// window ends. Only the session's goroutine touches it.
	lease mailLease
	// refusedRcpts counts the RCPTs refused with 550 on this connection
	// (Config.MaxRefusedRcpts); only the session's goroutine touches it.
	refusedRcpts int

	mu       sync.Mutex
	end      time.Time   // SessionTimeout: no read deadline goes past it
	stop     time.Time   // when Shutdown began; zero before
	progress time.Time   // start, or the end of the last DATA (IdleSessionTimeout)
	inData   bool        // Shutdown lets a DATA or BDAT transfer in progress finish
	dataEnd  time.Time   // DataTimeout: the end of the transfer in progress
	watch    *time.Timer // the transfer's rate watch (MinDataRate); nil when none
	slow     bool        // the rate watch ended the transfer

	received atomic.Int64 // bytes read from the peer (the rate watch)

	hangup atomic.Int32 // 0 open, 1 close after the next write, 2 closing
	closed sync.Once
}

// clamp bounds a read deadline by the session's end; during a message
// transfer by its end too (DataTimeout bounds a whole BDAT transfer, the
// commands between its chunks included); otherwise, for a command, by
// Shutdown and by the session's idle bound (IdleSessionTimeout after its
// last message).
func (c *conn) clamp(t time.Time, command bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.end
	switch {
	case c.inData:
		end = minTime(end, c.dataEnd)
	case command:
		end = minTime(end, c.progress.Add(c.srv.cfg.IdleSessionTimeout))
		if !c.stop.IsZero() {
			end = minTime(end, c.stop)
		}
	}
	if t.IsZero() || t.After(end) {
		return end
	}
	return t
}

// SetReadDeadline clamps t to the session's end: go-smtp resets the read
// deadline before every command, so this is where a whole-session bound and
// Shutdown reach it.
func (c *conn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t, true)) }

// SetDeadline clamps the read half like SetReadDeadline.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// Write writes, then closes the connection if the session was refused: the
// refusing reply (421) is the last thing the client reads.
func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.hangup.CompareAndSwap(1, 2) {
		c.linger()
	}
	return n, err
}

// hangUp arranges for the connection to close after the next reply.
func (c *conn) hangUp() { c.hangup.CompareAndSwap(0, 1) }

// hungUp reports whether the session was refused; commands the client
// pipelined after the refusal are answered without touching Redis.
func (c *conn) hungUp() bool { return c.hangup.Load() != 0 }

// Read counts the bytes received, for the rate watch.
func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(int64(n))
	return n, err
}

// startData marks a message transfer in progress (a DATA, or a BDAT
// transfer from its first chunk to its last), sets its whole-transfer
// deadline, which it returns, and starts its rate watch. A transfer the
// client already started may finish even when Shutdown began a moment
// before: only the session's end bounds it, and Shutdown's own context
// bounds the wait.
func (c *conn) startData(d time.Duration) time.Time {
	c.mu.Lock()
	c.dataEnd = minTime(time.Now().Add(d), c.end)
	c.inData = true
	end := c.dataEnd
	c.slow = false
	if rate := c.srv.cfg.MinDataRate; rate > 0 {
		window := c.srv.cfg.DataRateWindow
		floor := int64(float64(rate) * window.Seconds())
		last := c.received.Load()
		var t *time.Timer
		t = time.AfterFunc(window, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.watch != t {
				return // the transfer ended meanwhile
			}
			n := c.received.Load()
			if n-last >= floor {
				last = n
				t.Reset(window)
				return
			}
			// Too slow: the read in progress returns at once, and
			// session.Data answers errSlowTransfer.
			c.slow = true
			c.watch = nil
			_ = c.Conn.SetReadDeadline(time.Now())
		})
		c.watch = t
	}
	c.mu.Unlock()
	_ = c.Conn.SetReadDeadline(end)
	return end
}

// dataRead stops the rate watch: the transfer is over (parse and delivery
// follow, at their own pace). It reports whether the watch ended it.
func (c *conn) dataRead() (slow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watch != nil {
		c.watch.Stop()
		c.watch = nil
	}
	return c.slow
}

// endData ends the DATA: the idle bound counts again from now.
func (c *conn) endData() {
	c.dataRead()
	c.mu.Lock()
	c.inData = false
	c.progress = time.Now()
	c.mu.Unlock()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// shutdown ends the session at its next command: an idle read returns at
// once, a DATA in progress finishes first.
func (c *conn) shutdown(now time.Time) {
	c.mu.Lock()
	c.stop = now
	inData := c.inData
	c.mu.Unlock()
	if !inData {
		_ = c.Conn.SetReadDeadline(now)
	}
}

// linger closes after a refusal without losing the reply: closing a socket
// with unread input (pipelined commands) sends a RST, which can make the
// client's stack drop the reply still unread. So: FIN first, drain briefly,
// then close.
func (c *conn) linger() {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 64<<10))
	c.Close()
}

// closeRefused closes a connection refused before its session, right after
// its 421: lingering (see linger) while fewer than maxLingering refused
// connections do, at once otherwise.
func (c *conn) closeRefused() {
	if c.srv.lingering.Add(1) > maxLingering {
		c.srv.lingering.Add(-1)
		c.Close()
		return
	}
	c.srv.metrics.lingering.Inc()
	c.linger()
	c.srv.metrics.lingering.Dec()
	c.srv.lingering.Add(-1)
}

// Close closes the connection and frees its session slot; later calls are
// no-ops.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.closed.Do(func() {
		c.srv.release(c)
		err = c.Conn.Close()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// ownConn finds the admitted conn under go-smtp's connection, which is
// a *tls.Conn around it after STARTTLS.
func ownConn(nc net.Conn) (*conn, error) {
	for {
		switch c := nc.(type) {
		case *conn:
			return c, nil
		case *tls.Conn:
			nc = c.NetConn()
		default:
			return nil, fmt.Errorf("ingest: connection %T was not admitted by Serve", nc)
		}
	}
}

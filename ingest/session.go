package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/mayfly/mayfly/storage"
)

// backend is the go-smtp Backend; it keeps NewSession off Server's API.
type backend struct{ srv *Server }

// NewSession starts a session at HELO/EHLO (again after STARTTLS).
func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	own, err := ownConn(c.Conn())
	if err != nil {
		b.srv.log.Error("smtp session", "err", err)
		return nil, reply(err)
	}
	_, encrypted := c.TLSConnectionState()
	return &session{srv: b.srv, conn: own, tls: encrypted}, nil
}

// session is one SMTP conversation. go-smtp calls its methods from the
// connection's goroutine, one at a time.
type session struct {
	srv   *Server
	conn  *conn
	rcpts []string // distinct recipients accepted so far, ASCII lower-cased
	tls   bool     // after STARTTLS (go-smtp starts a new session then)
}

// refuse counts and logs a refusal before DATA and returns its reply; a 421
// closes the connection after the reply.
func (s *session) refuse(err error) error {
	if hangsUp(err) {
		s.conn.hangUp()
	}
	s.srv.metrics.rejections.WithLabelValues(reason(err)).Inc()
	s.srv.logClient(slog.LevelDebug, "smtp refused", s.conn.ip, slog.String("reason", reason(err)))
	return reply(err)
}

// refuseRcpt refuses a recipient with err (a 550), or with 421 once the
// connection has had Config.MaxRefusedRcpts refusals already.
func (s *session) refuseRcpt(err error) error {
	if s.conn.refusedRcpts++; s.conn.refusedRcpts > s.srv.cfg.MaxRefusedRcpts {
		return s.refuse(errRefusedRcpts)
	}
	return s.refuse(err)
}

// Mail starts a transaction. It counts against the client's transaction
// rate; over it the client gets 421 and the connection closes.
func (s *session) Mail(_ string, _ *smtp.MailOptions) error {
	s.rcpts = s.rcpts[:0]
	if s.conn.hungUp() {
		return reply(errHungUp)
	}
	if s.srv.shuttingDown() {
		return s.refuse(errShuttingDown)
	}
	if s.srv.cfg.RequireTLS && !s.tls {
		return s.refuse(errTLSRequired)
	}
	var err error
	if s.conn.counted {
		err, s.conn.counted = s.conn.firstMail, false
	} else {
		_, mail := s.srv.rules(s.conn)
		err = s.srv.allow(mail, s.conn.ip, errMailRate)
	}
	if err != nil {
		return s.refuse(err)
	}
	return nil
}

// Rcpt accepts a recipient only if its domain is ours and a live mailbox has
// the address, or, for a sub-address local+tag@domain (RFC 5233,
// storage.ParseRecipient), local@domain while the store writes a layout that
// records the tag; a malformed tag is 553 5.1.3. Addresses are compared
// ignoring ASCII case only (storage.LowerASCII). A repeated recipient is
// accepted once and stored once; an inbox and its sub-addresses are
// distinct recipients, each stored as a message of its own.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.conn.hungUp() {
		return reply(errHungUp)
	}
	addr := storage.LowerASCII(to)
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || !s.srv.domains[addr[at+1:]] {
		return s.refuseRcpt(errRelayDenied)
	}
	if slices.Contains(s.rcpts, addr) {
		return nil
	}
	if len(s.rcpts) >= s.srv.cfg.MaxRecipients {
		return s.refuse(errTooManyRecipients)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.srv.cfg.RedisTimeout)
	defer cancel()
	ok, err := s.srv.store.Exists(ctx, addr)
	if errors.Is(err, storage.ErrBadSubaddress) || errors.Is(err, storage.ErrLocalPartTooLong) {
		return s.refuseRcpt(err)
	}
	if err != nil {
		s.srv.redisError("smtp recipient check", s.conn.ip, err)
		return s.refuse(err)
	}
	if !ok {
		return s.refuseRcpt(storage.ErrMailboxNotFound)
	}
	s.rcpts = append(s.rcpts, addr)
	return nil
}

// Data reads the message, parses it once and stores it for every recipient.
// It returns nil (250) only after Redis acknowledged every delivery that
// could be made; see deliver for what a partial failure answers.
func (s *session) Data(r io.Reader) error {
	if s.conn.hungUp() {
		return reply(errHungUp)
	}
	deadline := s.conn.startData(s.srv.cfg.DataTimeout)
	defer s.conn.endData()

	raw, held, err := s.srv.readMessage(r, s.conn.ip)
	if s.conn.dataRead() && err != nil {
		err = errSlowTransfer
	}
	if err != nil {
		s.srv.releaseBuffer(s.conn.ip, held)
		return s.failData(err)
	}
	start := time.Now()
	key := storage.DeliveryKey(raw)
	size := len(raw)
	msg, failed, err := s.srv.parse(raw, deadline)
	s.srv.releaseMessage(s.conn.ip, raw, held) // msg holds copies (strings) only
	if err != nil {
		return s.failData(err)
	}
	msg.Key = key
	stored := time.Now()
	err = s.deliver(msg, failed)
	s.srv.metrics.stage.WithLabelValues("store").Observe(time.Since(stored).Seconds())
	s.srv.metrics.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		return s.failData(err)
	}
	s.srv.metrics.messages.WithLabelValues("accepted").Inc()
	s.srv.logClient(slog.LevelInfo, "smtp message accepted", s.conn.ip, slog.Int("recipients", len(s.rcpts)),
		slog.String("status", string(msg.Status)), slog.Int("bytes", size))
	return nil
}

// failData counts and logs a refused DATA and returns its reply.
func (s *session) failData(err error) error {
	if hangsUp(err) {
		s.conn.hangUp()
	}
	s.srv.metrics.messages.WithLabelValues(reason(err)).Inc()
	level := slog.LevelInfo
	if reason(err) == unknownReply.reason {
		level = slog.LevelError // a defect: an error the reply table does not name
	}
	s.srv.logClient(level, "smtp message refused", s.conn.ip, slog.String("reason", reason(err)), slog.Any("err", err))
	return reply(err)
}

// deliver stores msg for every recipient, one storage call each, all at once
// (rueidis pipelines them), and decides the one reply SMTP allows per DATA:
//
//   - any delivery failed because Redis was unavailable or its replicas did
//     not acknowledge it in time: 451, so the sender retries the whole
//     message later. The recipients whose delivery did succeed do not get it
//     twice: delivery is idempotent per mailbox (msg.Key, the digest of the
//     raw bytes), so the retry is acknowledged without a second copy.
//   - no recipient's mailbox is alive any more (expired or deleted since
//     RCPT): 550 5.1.1.
//   - otherwise 250; mailboxes that died between RCPT and DATA are skipped,
//     since nobody can read them.
//
// A message stored as failed (why is the reason label) is logged at info
// with each mailbox's tag, the message id and the reason, never any of its
// content, so an operator can find it from a user's report; it is counted
// once, when a first copy of it is stored (a retry that stores nothing new
// counts nothing).
func (s *session) deliver(msg storage.NewMessage, why string) error {
	errs := make([]error, len(s.rcpts))
	sums := make([]storage.Summary, len(s.rcpts))
	one := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), s.srv.cfg.RedisTimeout)
		defer cancel()
		sums[i], errs[i] = s.srv.store.Deliver(ctx, s.rcpts[i], msg)
	}
	if len(s.rcpts) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range s.rcpts {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	delivered, fresh := 0, 0
	var failed error
	for i, err := range errs {
		switch {
		case err == nil:
			delivered++
			s.srv.metrics.stored.WithLabelValues(string(msg.Status)).Inc()
			if why != "" && !sums[i].Duplicate {
				fresh++
				s.srv.logClient(slog.LevelInfo, "smtp message stored as failed", s.conn.ip,
					slog.String("mailbox", storage.TagOf(s.rcpts[i])), slog.Any("msg", sums[i].ID), slog.String("reason", why))
			}
		case errors.Is(err, storage.ErrMailboxNotFound):
			s.srv.logClient(slog.LevelDebug, "smtp mailbox gone before delivery", s.conn.ip, slog.String("mailbox", storage.TagOf(s.rcpts[i])))
		default:
			s.srv.redisError("smtp deliver", s.conn.ip, err)
			if failed == nil {
				failed = err
			}
		}
	}
	if fresh > 0 {
		s.srv.metrics.failed.WithLabelValues(why).Inc()
	}
	switch {
	case failed != nil:
		if delivered > 0 {
			s.srv.logClient(slog.LevelInfo, "smtp delivery partly failed; the retry is stored once per mailbox",
				s.conn.ip, slog.Int("delivered", delivered), slog.Int("recipients", len(s.rcpts)))
		}
		return fmt.Errorf("deliver: %w", failed)
	case delivered == 0:
		return storage.ErrMailboxNotFound
	}
	return nil
}

// Reset ends the transaction (RSET, a new EHLO, or after DATA).
func (s *session) Reset() { s.rcpts = s.rcpts[:0] }

// Logout is called when the connection closes; the slot is freed by the
// connection itself.
func (s *session) Logout() error { return nil }

// chunk is the unit a message is read in. Most messages fit one; chunks
// come from a pool (chunks) rather than being allocated and zeroed per
// message, which cost the node ~8 % of its CPU in D's profile.
const chunk = 64 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, chunk); return &b }}

// readMessage reads one message into memory for client, taking its bytes
// from the node's buffer budget and client's share of it as they arrive, in
// chunks of 64 KiB: a transfer holds what it received, rounded up to a
// chunk, never the doubling a growing slice would reserve. It returns the
// bytes held, which the caller gives back with releaseMessage (or
// releaseBuffer when it returns no message), also on error.
//
// A message of more than one chunk is copied into one slice at the end
// (the parser and the delivery key read it whole): for that moment it is
// held twice, which the budget counts (forceBuffer) but does not refuse,
// since the chunks are freed right after.
func (s *Server) readMessage(r io.Reader, client string) (raw []byte, held int64, err error) {
	// go-smtp's reader stops at MaxMessageBytes with smtp.ErrDataTooLarge;
	// one byte more is room to see that error or the end.
	limit := s.cfg.MaxMessageBytes + 1
	var full [][]byte // the chunks filled so far
	var cur []byte
	var total int64
	for {
		if len(cur) == cap(cur) {
			if cur != nil {
				full = append(full, cur)
			}
			if total >= limit {
				return nil, held, smtp.ErrDataTooLarge
			}
			size := min(chunk, limit-total)
			if err := s.acquireBuffer(client, size); err != nil {
				return nil, held, err
			}
			held += size
			if size == chunk {
				cur = (*chunks.Get().(*[]byte))[:0]
			} else {
				cur = make([]byte, 0, size)
			}
		}
		n, err := r.Read(cur[len(cur):cap(cur)])
		cur = cur[:len(cur)+n]
		total += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, held, fmt.Errorf("read message: %w", err)
		}
	}
	if len(full) == 0 {
		return cur, held, nil
	}
	s.forceBuffer(client, total)
	raw = make([]byte, 0, total)
	for _, b := range full {
		raw = append(raw, b...)
	}
	raw = append(raw, cur...)
	for _, b := range append(full, cur) {
		putChunk(b)
	}
	s.releaseBuffer(client, held)
	return raw, total, nil
}

// putChunk gives b back to the pool when it is one of its chunks: nothing
// may use b afterwards.
func putChunk(b []byte) {
	if cap(b) == chunk {
		b = b[:cap(b)]
		chunks.Put(&b)
	}
}

// releaseMessage gives back the bytes held for raw and, when raw is a
// chunk, the buffer itself: nothing may use raw afterwards.
func (s *Server) releaseMessage(client string, raw []byte, held int64) {
	s.releaseBuffer(client, held)
	putChunk(raw)
}

// parse runs the parser under the node's parse cap. A free slot is always
// taken; when every slot is busy it waits for one until deadline (the end
// of the DATA timeout), then gives up with errOverloaded (451 4.3.1). The
// transfer itself cannot outlive the deadline (the read deadlines end it
// with 421 4.4.2), so a message that arrived whole is parsed whenever a slot
// is free, however close to the deadline it ended: never a 451 drawn at
// random between a free slot and an expired timer. failed is the reason
// label of a message stored as failed (failReason), "" for a ready one.
func (s *Server) parse(raw []byte, deadline time.Time) (msg storage.NewMessage, failed string, err error) {
	select {
	case s.parses <- struct{}{}:
	default:
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case s.parses <- struct{}{}:
		case <-t.C:
			return storage.NewMessage{}, "", errOverloaded
		}
	}
	defer func() { <-s.parses }()
	start := time.Now()
	msg, why := s.parser.parse(raw)
	s.metrics.stage.WithLabelValues("parse").Observe(time.Since(start).Seconds())
	if msg.Status == storage.StatusFailed {
		failed = failReason(why)
	}
	return msg, failed, nil
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// redisError counts and logs a failed Redis call. The error text goes to
// the log only, never to the client.
func (s *Server) redisError(op, ip string, err error) {
	s.metrics.redisErrors.Inc()
	s.logClient(slog.LevelWarn, "redis unavailable", ip, slog.String("op", op), slog.Any("err", err))
}

package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/storage"
	"github.com/valyala/fasthttp"
)

// Events is what the event stream needs from storage; *storage.Store
// satisfies it. Errors: storage.ErrSessionInvalid, storage.ErrStreamReplaced,
// storage.ErrUnavailable.
type Events interface {
	OpenStream(ctx context.Context, session storage.Credential, token string, lastEvent uuid.UUID, maxReplay int) (storage.StreamStart, error)
	ReadStream(ctx context.Context, session storage.Credential, token, afterID string, max int) (storage.StreamRead, error)
	ReadStreams(ctx context.Context, reqs []storage.StreamReadReq, max int) []storage.StreamReadResult
	Listen(tag string, onEvent func(storage.Event), onSubscribed func()) (stop func())
}

const (
	streamMaxReplay = 100 // messages replayed after Last-Event-ID, and per catch-up read
	streamQueue     = 64  // signals a stream may have pending before it is cut off
)

// The reconnect delay a stream suggests to its client (its retry: field) is
// streamRetryMin plus up to streamRetrySpread, drawn per stream: when a
// node stops without a word (a crash, a kill, a restart) every client of
// its streams reconnects at once, and with one fixed delay they all came
// back in the same instant, more than a node opens at once. Spread over
// 5 s, 17,500 streams come back at 3,500 a second (bench F's restart
// storm). The official clients wait the last retry: of a stream that ended
// (README, Events).
const (
	streamRetryMin    = 1000 // ms
	streamRetrySpread = 5000 // ms
)

// streamRetry is the retry: field that starts a stream.
func streamRetry() string {
	return "retry: " + strconv.Itoa(streamRetryMin+rand.IntN(streamRetrySpread)) + "\n\n"
}

// streamRetryAfter is the 503 REQUEST_PROTECTION of a stream that does not
// open (the node holds MaxStreams, or MaxInFlight requests are in flight):
// its Retry-After is 1, 2 or 3 s, drawn per answer, so that the clients a
// node sheds in a reconnect storm come back spread over 3 s instead of
// together a second later.
func streamRetryAfter() *apiError {
	e := *errProtection
	e.retryAfter = 1 + rand.IntN(3)
	e.message = "The server is busy; retry after the seconds of Retry-After."
	return &e
}

// signal is what a stream is handed: an event or "resubscribed" (the hub),
// its heartbeat with its catch-up read (the wheel), or a timer's.
type signal struct {
	event  storage.Event
	resync bool
	beat   *storage.StreamReadResult
	timer  streamTimer
}

// streamTimer names a stream's timer signals.
type streamTimer uint8

const (
	timerNone   streamTimer = iota
	timerExpiry             // the mailbox may have expired
	timerProbe              // poll the client (a connection watchPeer cannot watch)
)

// hub holds one SSUBSCRIBE per mailbox that has open streams on this node,
// and fans its events out to the streams. The subscriptions are the
// store's Receiver's: one connection per Redis primary for all of them,
// and no goroutine per subscription. Its callbacks run on the goroutine
// that reads that connection, so fan-out never blocks: a stream whose
// queue is full is cut off instead.
type hub struct {
	events Events
	mu     sync.Mutex
	topics map[string]*topic
}

type topic struct {
	streams map[*sseStream]struct{}
	stop    func() // ends the subscription
}

func newHub(events Events) *hub {
	return &hub{events: events, topics: map[string]*topic{}}
}

func (h *hub) join(tag string, st *sseStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[tag]
	if t == nil {
		t = &topic{streams: map[*sseStream]struct{}{}}
		h.topics[tag] = t
		t.stop = h.events.Listen(tag,
			func(ev storage.Event) { h.fanout(tag, &signal{event: ev}) },
			func() { h.fanout(tag, &signal{resync: true}) })
	}
	t.streams[st] = struct{}{}
}

// leave removes st; the last stream of a mailbox ends its subscription.
func (h *hub) leave(tag string, st *sseStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[tag]
	if t == nil {
		return
	}
	delete(t.streams, st)
	if len(t.streams) == 0 {
		t.stop()
		delete(h.topics, tag)
	}
}

// fanout hands every stream of tag the same signal: one allocation per
// event, a pointer per queued slot.
func (h *hub) fanout(tag string, sig *signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.topics[tag]; t != nil {
		for st := range t.streams {
			st.post(sig, false)
		}
	}
}

// endWhy is why a stream ends while it may be writing.
type endWhy uint8

const (
	goesOn     endWhy = iota
	endPlain          // deleted, revoked, expired, a node change, a failed write: the end of the body
	endCut            // its queue overflowed: the end of the body
	endReplace        // a newer stream took over: a comment saying so, then the end
	endStop           // the node shuts down: the shutdown hint, then the end
	endGone           // the client went: nothing more is written
)

// sseStream is one open GET /events. No goroutine serves an idle stream:
// whatever it is handed (post) queues, and a goroutine is started to work
// through the queue and ends when the queue is empty. So 10,000 idle
// streams hold no stack (a goroutine's stack, once grown by a write or a
// Redis call, stays with it). While a signal is worked on, a signal that
// ends the stream (a takeover, a deletion, a revocation of its session, a
// cut-off, the node's shutdown, the client's going) ends it at once: the
// work's context ends and its write in progress, which a client that
// stopped reading may hold for the write timeout, is interrupted.
type sseStream struct {
	s       *Server
	conn    net.Conn
	w       *sseWriter
	session storage.Credential
	token   string
	lastID  string // stream id of the last message sent (or covered at open)
	// node is the id of the Redis node whose stream lastID belongs to (set
	// at open, '' when unknown). Stream ids order one node's history only:
	// after a failover or a slot migration the new primary may hold
	// acknowledged messages with ids below lastID (the old primary sent an
	// entry the heal then discarded), which a read "after lastID" never
	// finds. So a message event or a catch-up read from another node ends
	// the stream; the client reconnects and lists (spec, Events), and the
	// list finds every stored message. It is only compared, never updated.
	node    string
	mailbox uuid.UUID // for the log
	// address is the inbox's: the "to" of a message event stored before
	// layout 2026-11-27, which carries none.
	address string
	rid     string // the request id, for the log
	expires time.Time
	replay  []storage.Summary // sent at the start, then dropped
	expiry  *time.Timer       // posts timerExpiry
	// expiryAt is what expiry is set for (zero: it fired): see armExpiry.
	expiryAt time.Time
	probe    *time.Timer // posts timerProbe (nil: watchPeer watches)
	unwatch  func()
	// slot and pos place the stream on the heartbeat wheel (beats.mu).
	slot, pos int

	mu      sync.Mutex
	queue   []*signal // at most streamQueue
	running bool      // a goroutine works through the queue (serve)
	busy    bool      // ... and is working on a signal, with cancel
	cancel  context.CancelFunc
	why     endWhy // set: the stream ends
	begun   bool   // its start was written (or tried)
	// idMu guards lastID's writes and the wheel's reads of it (sentID);
	// the serving goroutine reads it without.
	idMu sync.Mutex
}

// post queues sig for the stream (never blocking). A full queue cuts the
// stream off (it cannot keep up), unless soft: then sig is dropped (a
// heartbeat).
func (st *sseStream) post(sig *signal, soft bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.why != goesOn {
		return
	}
	if len(st.queue) >= streamQueue {
		if !soft {
			st.haltLocked(endCut)
		}
		return
	}
	st.queue = append(st.queue, sig)
	if st.busy {
		if end, replaced := st.ends(sig); end {
			why := endPlain
			if replaced {
				why = endReplace
			}
			st.haltLocked(why)
			return
		}
	}
	st.startLocked()
}

// halt ends the stream at once (cut, the client gone, shutdown).
func (st *sseStream) halt(why endWhy) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.haltLocked(why)
}

func (st *sseStream) haltLocked(why endWhy) {
	if st.why != goesOn {
		return
	}
	st.why = why
	if st.busy {
		st.cancel()
		st.w.out.interrupt()
	}
	st.startLocked()
}

func (st *sseStream) startLocked() {
	if !st.running {
		st.running = true
		st.s.workers.run(st)
	}
}

// streamWorkersIdle is how many goroutines wait for streams to serve:
// a stream's heartbeat (its catch-up and its ping, once every 20 s for
// each of 10,000 streams) does not start a goroutine and grow its stack
// each time (idleWorkers).
const streamWorkersIdle = 16

// gone ends the stream of a client that went away: nothing more is written.
func (st *sseStream) gone() { st.halt(endGone) }

// setLast records the stream id of the last message sent.
func (st *sseStream) setLast(id string) {
	st.idMu.Lock()
	st.lastID = id
	st.idMu.Unlock()
}

// sentID is lastID, for the heartbeat wheel's goroutine.
func (st *sseStream) sentID() string {
	st.idMu.Lock()
	defer st.idMu.Unlock()
	return st.lastID
}

func (s *Server) handleEvents(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	if n := s.streams.Add(1); n > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		return errProtection
	}
	opened := false
	defer func() {
		if !opened {
			s.streams.Add(-1)
		}
	}()
	var last uuid.UUID
	if v := ctx.Request.Header.Peek("Last-Event-ID"); len(v) == 36 {
		last, _ = uuid.ParseBytes(v)
	}
	st := &sseStream{s: s, session: sess, token: randomID() + randomID(), slot: -1}
	start, err := s.store.OpenStream(c.ctx, sess, st.token, last, streamMaxReplay)
	if err != nil {
		return err
	}
	st.rid = requestID(ctx)
	st.lastID, st.expires, st.node = start.LastID, start.Mailbox.ExpiresAt, start.Node
	st.mailbox, st.address, st.replay = start.Mailbox.ID, start.Mailbox.Address, start.Replay
	opened = true
	// The stream outlives the handler: it runs on the connection, free of
	// fasthttp's buffers and write deadline. fasthttp keeps a hijacked
	// connection open (KeepHijackedConns), so the stream takes the raw
	// connection and the hijack handler returns at once: fasthttp then
	// frees the request context and drops the connection's 8 KiB read
	// buffer, instead of holding both for the stream's life (scenario F:
	// about 12 KiB of its 30 per stream). An event-stream client sends
	// nothing after its request, so no buffered byte is lost.
	st.conn = ctx.Conn()
	st.w = newSSEWriter(st.conn, s.cfg.WriteTimeout)
	st.w.address = st.address
	// Added here, not in the hijack handler: fasthttp runs that on a
	// goroutine of its own after the request's connection stopped counting
	// as open, so Shutdown, which waits for no open connection before it
	// waits for the streams, could start waiting before the Add (a race,
	// and a stream Shutdown would not wait for).
	s.streamWG.Add(1)
	s.liveMu.Lock()
	s.live[st] = struct{}{}
	s.liveMu.Unlock()
	st.running = true // serve, from the hijack handler: the start
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(net.Conn) { go s.serve(st) })
	return nil
}

// serve works through st's queue, the stream's start first, and returns
// when the queue is empty; or ends the stream when it must end: the
// client goes, the mailbox expires or is deleted, a newer stream takes
// over, the node shuts down.
func (s *Server) serve(st *sseStream) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("event stream panic", "request_id", st.rid, "err", p)
			st.mu.Lock()
			if st.why == goesOn {
				st.why = endPlain
			}
			st.busy, st.running = false, true
			st.mu.Unlock()
			s.finish(st)
		}
	}()
	for {
		st.mu.Lock()
		if st.why != goesOn {
			st.busy = false
			st.mu.Unlock()
			s.finish(st)
			return
		}
		first := !st.begun
		st.begun = true
		var sig *signal
		if !first {
			if len(st.queue) == 0 {
				st.running = false
				st.mu.Unlock()
				return
			}
			sig = st.queue[0]
			if st.queue = st.queue[1:]; len(st.queue) == 0 {
				st.queue = nil
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		st.busy, st.cancel = true, cancel
		st.mu.Unlock()
		var ok bool
		if first {
			ok = s.startStream(ctx, st)
		} else {
			ok = s.handleSignal(ctx, st, sig)
		}
		cancel()
		st.mu.Lock()
		st.busy, st.cancel = false, nil
		if !ok && st.why == goesOn {
			st.why = endPlain
		}
		st.mu.Unlock()
	}
}

// startStream writes the stream's start: the response's head, the retry
// field and the replay, and catches up. The stream joins the hub before it
// writes anything, the replay included: a replay of 100 messages to a
// client that stops reading holds its writes for the write timeout, and
// meanwhile a takeover, a deletion, a revocation and the node's shutdown
// still end it at once.
func (s *Server) startStream(ctx context.Context, st *sseStream) bool {
	w := st.w
	st.conn.SetDeadline(time.Time{}) // fasthttp's read/write deadlines do not apply to a stream
	// A client that closes its end is noticed by the process's one epoll
	// watcher as it happens, with no timer or blocked read per stream
	// (peerwatch_linux.go). Where a connection cannot be watched, the
	// stream polls it every streamProbe.
	if unwatch, ok := watchPeer(st.conn, st.gone); ok {
		st.unwatch = unwatch
	} else {
		st.probe = time.AfterFunc(streamProbe, func() { st.post(&signal{timer: timerProbe}, true) })
	}
	st.expiry = time.AfterFunc(time.Until(st.expires), func() { st.post(&signal{timer: timerExpiry}, false) })
	st.expiryAt = st.expires
	s.hub.join(st.session.Tag, st)
	select {
	case <-s.stopStreams:
		st.halt(endStop) // Shutdown may have looked at the live streams before this one
	default:
	}
	w.during = "replay"
	w.header(st.rid)
	w.chunk(streamRetry())
	for _, m := range st.replay {
		if ctx.Err() != nil {
			return false
		}
		w.message(m)
	}
	st.replay = nil
	if w.flush() != nil {
		return false
	}
	// Publications between the open script and join were missed: catch up.
	w.during = "catch-up"
	if !s.catchUpNow(ctx, w, st) {
		return false
	}
	// Heartbeats come from the node's wheel (beats.go), spread over the
	// period, each with its catch-up read.
	s.beats.join(st)
	st.armExpiry()
	return true
}

// armExpiry sets the expiry timer for st.expires unless it is set for it
// already: a heartbeat's read nearly always finds the deadline unchanged,
// and a Reset per heartbeat moved a timer of every idle stream.
func (st *sseStream) armExpiry() {
	if !st.expires.Equal(st.expiryAt) {
		st.expiryAt = st.expires
		st.expiry.Reset(time.Until(st.expires))
	}
}

// finish ends the stream for st.why: what it writes last, then everything
// it held goes.
func (s *Server) finish(st *sseStream) {
	defer s.streams.Add(-1)
	defer s.streamWG.Done()
	w := st.w
	if st.unwatch != nil {
		st.unwatch()
	}
	if st.probe != nil {
		st.probe.Stop()
	}
	if st.expiry != nil {
		st.expiry.Stop()
	}
	if st.slot >= 0 {
		s.beats.leave(st)
	}
	s.hub.leave(st.session.Tag, st)
	s.liveMu.Lock()
	delete(s.live, st)
	s.liveMu.Unlock()
	// An interrupted write has failed (no more is written); one that was
	// interrupted between two writes lets the last words through.
	w.out.resume()
	if !w.headed && st.why != endGone {
		w.header(st.rid) // it ends before it started
	}
	switch st.why {
	case endReplace:
		w.chunk(replacedComment) // tells the client why: another stream took over
	case endStop:
		w.chunk(shutdownHint())
	}
	if st.why != endGone {
		w.end()
	}
	st.conn.Close()
	if w.timedOut {
		s.streamTimedOut(w, st)
	}
	st.mu.Lock()
	st.queue = nil
	st.mu.Unlock()
}

// stopAllStreams ends every open stream with the shutdown hint (Shutdown).
func (s *Server) stopAllStreams() {
	s.liveMu.Lock()
	live := make([]*sseStream, 0, len(s.live))
	for st := range s.live {
		live = append(live, st)
	}
	s.liveMu.Unlock()
	for _, st := range live {
		st.halt(endStop)
	}
}

// replacedComment ends a stream that a newer one on the same inbox took
// over, so a client can tell that from a node going away: the official
// clients then poll for a while instead of taking the stream back.
const replacedComment = ": replaced by a newer stream on this inbox\n\n"

// streamProbe is how often a stream whose connection watchPeer cannot
// watch checks that its client is still connected.
const streamProbe = time.Second

// clientGone reports whether the peer of an event stream closed or reset
// its connection. Bytes it sent (an event-stream client sends none after its
// request) are read and dropped.
func clientGone(conn net.Conn) bool {
	var b [64]byte
	_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := conn.Read(b[:])
	_ = conn.SetReadDeadline(time.Time{})
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// ends reports whether sig ends the stream whatever it is doing, and
// whether that is because a newer stream took over.
func (st *sseStream) ends(sig *signal) (end, replaced bool) {
	if sig.resync || sig.beat != nil || sig.timer != timerNone {
		return false, false
	}
	switch ev := sig.event; ev.Type {
	case storage.EventDeleted:
		return true, false
	case storage.EventTakeover:
		return ev.Token != st.token, ev.Token != st.token
	case storage.EventRevoked:
		return ev.Revokes(st.session), false
	}
	return false, false
}

// handleSignal reacts to one signal; false ends the stream. ctx ends when
// the stream must end at once.
func (s *Server) handleSignal(ctx context.Context, st *sseStream, sig *signal) bool {
	w := st.w
	switch {
	case sig.timer == timerProbe:
		if clientGone(st.conn) {
			st.halt(endGone)
			return false
		}
		st.probe.Reset(streamProbe)
		return true
	case sig.timer == timerExpiry:
		// Expiry without a missed extension ends the stream; the catch-up
		// learns which it is and moves the deadline.
		st.expiryAt = time.Time{} // it fired: set it again whatever the read finds
		w.during = "catch-up"
		if !s.catchUpNow(ctx, w, st) {
			return false
		}
		st.armExpiry()
		return true
	case sig.beat != nil:
		// Each heartbeat also sends what the mailbox stored since the last
		// message sent (the wheel read it). A publication can be lost
		// without the subscription failing: a primary cut off from the
		// cluster keeps its subscribers while the promoted replica takes
		// the deliveries (deploy/README.md, the partition drill). So a
		// message stored after the last entry sent reaches an open stream
		// within a heartbeat whatever happened to its publication. The
		// read rechecks the session's access too.
		w.during = "heartbeat"
		ok, more := s.applyRead(ctx, w, st, sig.beat.Read, sig.beat.Err)
		if ok && more {
			ok = s.catchUpNow(ctx, w, st)
		}
		if !ok {
			return false
		}
		w.chunk(": ping\n\n")
		if w.flush() != nil {
			return false
		}
		st.armExpiry()
		return true
	case sig.resync:
		w.during = "catch-up"
		if !s.catchUpNow(ctx, w, st) {
			return false
		}
		st.armExpiry()
		return true
	}
	if end, replaced := st.ends(sig); end {
		if replaced {
			w.chunk(replacedComment) // tells the client why: another stream took over
		}
		return false
	}
	switch ev := sig.event; ev.Type {
	case storage.EventMessage:
		// Before the id comparison: another node's ids may be below lastID
		// although the stream never sent those messages.
		if s.nodeChanged(st, ev.Node, "event") {
			return false
		}
		if streamIDAfter(ev.Message.StreamID, st.lastID) {
			w.during = "event"
			w.message(ev.Message)
			st.setLast(ev.Message.StreamID)
			return w.flush() == nil
		}
	case storage.EventExtended:
		st.expires = ev.ExpiresAt
		st.armExpiry()
	}
	return true
}

// catchUpNow sends what the mailbox's stream holds after the last message
// sent, and learns whether the stream may go on. A Redis failure keeps the
// stream open: the next resubscription, heartbeat or expiry check tries
// again. ctx ends when the stream must end.
func (s *Server) catchUpNow(ctx context.Context, w *sseWriter, st *sseStream) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	for {
		read, err := s.store.ReadStream(ctx, st.session, st.token, st.lastID, streamMaxReplay)
		if ok, more := s.applyRead(ctx, w, st, read, err); !ok || !more {
			return ok
		}
	}
}

// applyRead sends what a catch-up read found and learns whether the
// stream may go on (ok), and whether there may be more to read (more: the
// read was full). Messages the stream sent since the read was made (the
// heartbeat wheel reads ahead of the stream) are skipped.
func (s *Server) applyRead(ctx context.Context, w *sseWriter, st *sseStream, read storage.StreamRead, err error) (ok, more bool) {
	if err != nil {
		if isUnavailable(err) {
			if errors.Is(ctx.Err(), context.Canceled) {
				return false, false // the stream is ending: not Redis' failure
			}
			s.log.Warn("event stream catch-up", "err", err)
			if time.Until(st.expires) <= 0 {
				st.expires = time.Now().Add(time.Second) // look again soon
			}
			return true, false
		}
		if errors.Is(err, storage.ErrStreamReplaced) {
			w.chunk(replacedComment)
		}
		return false, false // expired, deleted, or taken over
	}
	if s.nodeChanged(st, read.Node, "catch-up") {
		return false, false
	}
	st.expires = read.ExpiresAt
	for _, m := range read.Messages {
		if streamIDAfter(m.StreamID, st.lastID) {
			w.message(m)
			st.setLast(m.StreamID)
		}
	}
	if w.flush() != nil {
		return false, false
	}
	return true, len(read.Messages) >= streamMaxReplay
}

// nodeChanged reports whether node, the Redis node that published an event
// or answered a read, is not the one whose history st has sent; then the
// stream must end (see sseStream.node), and it is counted and logged. An
// unknown node on either side (a node of an older version published it, or
// a standalone Redis) is no change: mixed versions never end a stream.
func (s *Server) nodeChanged(st *sseStream, node, via string) bool {
	if node == "" || st.node == "" || node == st.node {
		return false
	}
	s.metrics.streamNodeChanged.Inc()
	s.log.Info("event stream ended: another Redis node answers for the mailbox; the client reconnects and lists",
		"mailbox", st.mailbox.String(), "request_id", st.rid, "via", via, "from_node", st.node, "to_node", node)
	return true
}

// streamIDAfter reports whether Redis stream id a ("ms-seq") is after b.
func streamIDAfter(a, b string) bool {
	am, as := splitStreamID(a)
	bm, bs := splitStreamID(b)
	return am > bm || am == bm && as > bs
}

func splitStreamID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	q, _ := strconv.ParseUint(seq, 10, 64)
	return m, q
}

// sseWriter writes a chunked text/event-stream response on a raw connection.
// The first write error sticks: later writes are no-ops and flush reports it.
type sseWriter struct {
	out *deadlineConn
	// w buffers writes onto out from the first write to the flush after
	// it; an idle stream holds none (sseBufs).
	w      *bufio.Writer
	err    error
	during string // what the stream is writing, for the log
	// timedOut: a write took longer than the write timeout (not one of
	// end's: the stream was ending anyway).
	timedOut bool
	ending   bool
	address  string // the inbox's: see sseStream.address
	headed   bool   // the response's head was written
}

func newSSEWriter(conn net.Conn, timeout time.Duration) *sseWriter {
	out := &deadlineConn{conn: conn, raw: socketOf(conn), timeout: timeout}
	return &sseWriter{out: out}
}

// sseBufs are the streams' write buffers, taken for a write and given back
// at its flush: 10,000 idle streams held 10 MiB of them.
var sseBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1024) }}

// fail records the first write error.
func (w *sseWriter) fail(err error) {
	w.err = err
	w.timedOut = !w.ending && errors.Is(err, os.ErrDeadlineExceeded)
}

func (w *sseWriter) header(rid string) {
	w.headed = true
	w.write("HTTP/1.1 200 OK\r\n" +
		"Content-Type: text/event-stream\r\n" +
		"Cache-Control: no-cache\r\n" +
		"X-Accel-Buffering: no\r\n" +
		"X-Content-Type-Options: nosniff\r\n" +
		"X-Request-ID: " + rid + "\r\n" +
		"Transfer-Encoding: chunked\r\n" +
		"Connection: close\r\n\r\n")
}

func (w *sseWriter) write(s string) {
	if w.err == nil {
		if w.w == nil {
			w.w = sseBufs.Get().(*bufio.Writer)
			w.w.Reset(w.out)
		}
		if _, err := w.w.WriteString(s); err != nil {
			w.fail(err)
		}
	}
}

// chunk writes s as one chunk of the chunked encoding.
func (w *sseWriter) chunk(s string) {
	w.write(strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n")
}

// message writes one message.received event; data is the MessageSummary.
func (w *sseWriter) message(m storage.Summary) {
	if m.To == "" {
		m.To = w.address
	}
	data, _ := json.Marshal(viewSummary(m))
	b := make([]byte, 0, 64+len(data))
	b = append(b, "event: message.received\nid: "...)
	b = append(b, m.ID.String()...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	w.chunk(string(b))
}

func (w *sseWriter) flush() error {
	if w.w == nil {
		return w.err
	}
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.fail(err)
		}
	}
	if w.err != nil || w.w.Buffered() == 0 {
		w.w.Reset(nil)
		sseBufs.Put(w.w)
		w.w = nil
	}
	return w.err
}

// streamEndTimeout bounds the writes that end a stream (what is buffered,
// a comment, the end of the body): the stream ends for another reason, and
// a client that takes nothing more must not hold a takeover or the node's
// shutdown for the whole write timeout.
const streamEndTimeout = time.Second

// end closes the chunked body so the client sees a clean end of stream.
func (w *sseWriter) end() {
	w.ending = true
	w.out.endWithin(streamEndTimeout)
	w.write("0\r\n\r\n")
	w.flush()
}

// errStreamInterrupted is a stream write cut short because the stream ends
// (deadlineConn.interrupt).
var errStreamInterrupted = errors.New("edge: event stream write interrupted: the stream ends")

// deadlineConn is a stream's connection as its buffer writes to it. A
// write the socket's send buffer takes whole at once (a heartbeat, an
// event, nearly every write of a client that reads) goes straight to the
// socket, without waiting and so without a deadline (writeNow): a deadline
// arms a runtime timer that, left armed, fires once the write is long done,
// a wake-up per heartbeat of every idle stream (issue 39). What the buffer
// does not take is written with a deadline of its own, the write timeout
// from its start, which is cleared when the write returns: a deadline set
// once, at a flush, has passed for a write that a long event or a catch-up
// makes more than the write timeout later (the buffer holds 1 KiB, and a
// longer event is written through at once), and that write failed at once
// (issue 34). A write that the client does not take within the timeout
// fails: the client stopped reading.
type deadlineConn struct {
	conn    net.Conn
	raw     syscall.RawConn // conn's socket for writeNow; nil: every write has a deadline
	timeout time.Duration
	mu      sync.Mutex // orders interrupt with a write's start and its deadline
	stopped bool       // interrupted: writes fail until resume
	endBy   time.Time  // no write's deadline is later (zero: none)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return 0, errStreamInterrupted
	}
	n := 0
	if c.raw != nil {
		// Under mu: once interrupt has returned no write is under way
		// here, and none starts.
		if n = writeNow(c.raw, p); n == len(p) {
			c.mu.Unlock()
			return n, nil
		}
	}
	deadline := time.Now().Add(c.timeout)
	if !c.endBy.IsZero() && c.endBy.Before(deadline) {
		deadline = c.endBy
	}
	err := c.conn.SetWriteDeadline(deadline)
	c.mu.Unlock()
	if err != nil {
		return n, err
	}
	m, err := c.conn.Write(p[n:])
	n += m
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			err = errStreamInterrupted
		}
		return n, err
	}
	// No deadline stays behind to fire later, or to fail the next
	// writeNow once it has passed.
	_ = c.conn.SetWriteDeadline(time.Time{})
	return n, err
}

// interrupt makes the write in progress, if any, return at once, and the
// writes after it fail, until resume. A write in progress is one the
// client holds up: a connection whose send buffer has room takes a write
// at once.
func (c *deadlineConn) interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	_ = c.conn.SetWriteDeadline(time.Now())
}

// resume lets writes through again (the comment and the end of a stream
// that was interrupted between two writes).
func (c *deadlineConn) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = false
}

// endWithin bounds every later write's deadline to d from now.
func (c *deadlineConn) endWithin(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endBy = time.Now().Add(min(d, c.timeout))
}

// writeTimeoutLogEvery is the least time between two log lines about
// streams a write timeout ended.
const writeTimeoutLogEvery = 10 * time.Second

// timeoutLog counts the event streams a write timeout ended, for the log
// line that says so: the first, then at most one every writeTimeoutLogEvery
// with the count since the last (a flood of stalled clients is no flood of
// log).
type timeoutLog struct {
	count    atomic.Int64
	logged   atomic.Int64 // count at the last line
	loggedAt atomic.Int64 // Unix ns of the last line
}

// streamTimedOut counts and logs a stream that a write timeout ended. The
// line names the mailbox and the request, never a credential.
func (s *Server) streamTimedOut(w *sseWriter, st *sseStream) {
	s.metrics.streamWriteTimeouts.Inc()
	t := &s.writeTimeouts
	n := t.count.Add(1)
	now := time.Now().UnixNano()
	last := t.loggedAt.Load()
	if last != 0 && now-last < int64(writeTimeoutLogEvery) || !t.loggedAt.CompareAndSwap(last, now) {
		return
	}
	s.log.Info("event stream ended: its client took no data for the write timeout",
		"mailbox", st.mailbox.String(), "request_id", st.rid, "during", w.during,
		"write_timeout", s.cfg.WriteTimeout.String(), "streams", n-t.logged.Swap(n))
}

package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
	Subscribe(ctx context.Context, tag string, onEvent func(storage.Event), onSubscribed func()) error
}

const (
	streamRetryMS   = 3000 // the reconnect delay we suggest to clients
	streamMaxReplay = 100  // messages replayed after Last-Event-ID, and per catch-up read
	streamQueue     = 64   // signals a stream may have pending before it is cut off
)

// signal is what the hub hands a stream: an event, or "resubscribed".
type signal struct {
	event  storage.Event
	resync bool
}

// hub holds one SSUBSCRIBE per mailbox that has open streams on this node,
// and fans its events out to the streams. Its callbacks run on rueidis
// goroutines that serve every command to that Redis node, so fan-out never
// blocks: a stream whose queue is full is cut off instead.
type hub struct {
	events Events
	mu     sync.Mutex
	topics map[string]*topic
}

type topic struct {
	streams map[*sseStream]struct{}
	cancel  context.CancelFunc
}

func newHub(events Events) *hub {
	return &hub{events: events, topics: map[string]*topic{}}
}

func (h *hub) join(tag string, st *sseStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[tag]
	if t == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t = &topic{streams: map[*sseStream]struct{}{}, cancel: cancel}
		h.topics[tag] = t
		go h.events.Subscribe(ctx, tag,
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
		t.cancel()
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
			select {
			case st.signals <- sig:
			default:
				st.cut() // it cannot keep up: closed, never waited for
			}
		}
	}
}

// sseStream is one open GET /events.
type sseStream struct {
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
	rid     string    // the request id, for the log
	expires time.Time
	signals chan *signal
	cutOnce sync.Once
	cutCh   chan struct{}
}

func (st *sseStream) cut() { st.cutOnce.Do(func() { close(st.cutCh) }) }

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
	st := &sseStream{session: sess, token: randomID() + randomID(), signals: make(chan *signal, streamQueue), cutCh: make(chan struct{})}
	start, err := s.store.OpenStream(c.ctx, sess, st.token, last, streamMaxReplay)
	if err != nil {
		return err
	}
	rid := requestID(ctx)
	st.lastID, st.expires, st.node = start.LastID, start.Mailbox.ExpiresAt, start.Node
	st.mailbox, st.rid = start.Mailbox.ID, rid
	opened = true
	// The stream outlives the handler: it runs on the connection in its own
	// goroutine, free of fasthttp's buffers and write deadline. fasthttp
	// keeps a hijacked connection open (KeepHijackedConns), so the stream
	// takes the raw connection and the hijack handler returns at once:
	// fasthttp then frees the request context and drops the connection's
	// 8 KiB read buffer, instead of holding both for the stream's life
	// (scenario F: about 12 KiB of its 30 per stream). An event-stream
	// client sends nothing after its request, so no buffered byte is lost.
	raw := ctx.Conn()
	// Added here, not in the hijack handler: fasthttp runs that on a
	// goroutine of its own after the request's connection stopped counting
	// as open, so Shutdown, which waits for no open connection before it
	// waits for the streams, could start waiting before the Add (a race,
	// and a stream Shutdown would not wait for).
	s.streamWG.Add(1)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(net.Conn) {
		go func() {
			defer s.streams.Add(-1)
			s.serveStream(raw, st, rid, start.Replay)
		}()
	})
	return nil
}

// serveStream writes the event stream until the client goes, the mailbox
// expires or is deleted, a newer stream takes over, or the node shuts down.
// The caller has added it to s.streamWG.
func (s *Server) serveStream(conn net.Conn, st *sseStream, rid string, replay []storage.Summary) {
	defer s.streamWG.Done()
	defer conn.Close()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("event stream panic", "request_id", rid, "err", p)
		}
	}()
	tag := st.session.Tag
	w := &sseWriter{conn: conn, w: bufio.NewWriterSize(conn, 1024), timeout: s.cfg.WriteTimeout}
	conn.SetDeadline(time.Time{}) // fasthttp's read/write deadlines do not apply to a stream

	w.header(rid)
	w.chunk("retry: " + strconv.Itoa(streamRetryMS) + "\n\n")
	for _, m := range replay {
		w.message(m)
	}
	if w.flush() != nil {
		return
	}
	s.hub.join(tag, st)
	defer s.hub.leave(tag, st)
	// Publications between the open script and join were missed: catch up.
	if !s.catchUp(w, st) {
		w.end()
		return
	}

	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	// A client that closed its end is noticed within a probe interval, not
	// at the next heartbeat write (20-40 s): a read with a 1 ms deadline
	// returns EOF at once on a closed connection, and times out otherwise.
	// No reader goroutine per stream: scenario F's memory stays as it was.
	probe := time.NewTicker(streamProbe)
	defer probe.Stop()
	expiry := time.NewTimer(time.Until(st.expires))
	defer expiry.Stop()
	for {
		select {
		case sig := <-st.signals:
			if !s.handleSignal(w, st, sig, expiry) {
				w.end()
				return
			}
		case <-probe.C:
			if clientGone(conn) {
				return
			}
		case <-heartbeat.C:
			// Each heartbeat also reads what the mailbox stored since the
			// last message sent. A publication can be lost without the
			// subscription failing: a primary cut off from the cluster
			// keeps its subscribers while the promoted replica takes the
			// deliveries (deploy/README.md, the partition drill). So a
			// message stored after the last entry sent reaches an open
			// stream within a heartbeat whatever happened to its
			// publication. One stream read per stream per heartbeat
			// (10,000 streams at 20 s: 500 a second).
			if !s.catchUp(w, st) {
				w.end()
				return
			}
			expiry.Reset(time.Until(st.expires))
			w.chunk(": ping\n\n")
			if w.flush() != nil {
				return // the client is gone
			}
		case <-expiry.C:
			// Expiry without a missed extension ends the stream; catchUp
			// learns which it is and moves the deadline.
			if !s.catchUp(w, st) {
				w.end()
				return
			}
			expiry.Reset(time.Until(st.expires))
		case <-st.cutCh:
			w.end()
			return
		case <-s.stopStreams:
			w.chunk(shutdownHint())
			w.end()
			return
		}
	}
}

// replacedComment ends a stream that a newer one on the same inbox took
// over, so a client can tell that from a node going away: the official
// clients then poll for a while instead of taking the stream back.
const replacedComment = ": replaced by a newer stream on this inbox\n\n"

// streamProbe is how often an open stream checks that its client is still
// connected.
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

// handleSignal reacts to one hub signal; false ends the stream.
func (s *Server) handleSignal(w *sseWriter, st *sseStream, sig *signal, expiry *time.Timer) bool {
	if sig.resync {
		if !s.catchUp(w, st) {
			return false
		}
		expiry.Reset(time.Until(st.expires))
		return true
	}
	switch ev := sig.event; ev.Type {
	case storage.EventMessage:
		// Before the id comparison: another node's ids may be below lastID
		// although the stream never sent those messages.
		if s.nodeChanged(st, ev.Node, "event") {
			return false
		}
		if streamIDAfter(ev.Message.StreamID, st.lastID) {
			w.message(ev.Message)
			st.lastID = ev.Message.StreamID
			return w.flush() == nil
		}
	case storage.EventExtended:
		st.expires = ev.ExpiresAt
		expiry.Reset(time.Until(st.expires))
	case storage.EventDeleted:
		return false
	case storage.EventTakeover:
		if ev.Token != st.token {
			w.chunk(replacedComment) // tells the client why: another stream took over
			return false
		}
		return true
	case storage.EventRevoked:
		return !ev.Revokes(st.session)
	}
	return true
}

// catchUp sends what the mailbox's stream holds after the last message sent,
// and learns whether the stream may go on. A Redis failure keeps the stream
// open: the next resubscription or expiry check tries again.
//
// It runs on a goroutine of its own: the Redis call and the JSON encoding
// need a deep stack, and a stack once grown stays with its goroutine, so
// 10,000 idle streams would each keep one. The stream's own goroutine only
// waits and writes.
func (s *Server) catchUp(w *sseWriter, st *sseStream) bool {
	done := make(chan bool, 1)
	go func() { done <- s.catchUpNow(w, st) }()
	return <-done
}

func (s *Server) catchUpNow(w *sseWriter, st *sseStream) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	for {
		read, err := s.store.ReadStream(ctx, st.session, st.token, st.lastID, streamMaxReplay)
		if err != nil {
			if isUnavailable(err) {
				s.log.Warn("event stream catch-up", "err", err)
				if time.Until(st.expires) <= 0 {
					st.expires = time.Now().Add(time.Second) // look again soon
				}
				return true
			}
			if errors.Is(err, storage.ErrStreamReplaced) {
				w.chunk(replacedComment)
			}
			return false // expired, deleted, or taken over
		}
		if s.nodeChanged(st, read.Node, "catch-up") {
			return false
		}
		st.expires = read.ExpiresAt
		for _, m := range read.Messages {
			w.message(m)
			st.lastID = m.StreamID
		}
		if w.flush() != nil {
			return false
		}
		if len(read.Messages) < streamMaxReplay {
			return true
		}
	}
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
	conn    net.Conn
	w       *bufio.Writer
	timeout time.Duration
	err     error
	buf     []byte
}

func (w *sseWriter) header(rid string) {
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
		_, w.err = w.w.WriteString(s)
	}
}

// chunk writes s as one chunk of the chunked encoding.
func (w *sseWriter) chunk(s string) {
	w.write(strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n")
}

// message writes one message.received event; data is the MessageSummary.
func (w *sseWriter) message(m storage.Summary) {
	data, _ := json.Marshal(viewSummary(m))
	b := w.buf[:0]
	b = append(b, "event: message.received\nid: "...)
	b = append(b, m.ID.String()...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	w.buf = b
	w.chunk(string(b))
}

func (w *sseWriter) flush() error {
	if w.err == nil {
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		w.err = w.w.Flush()
	}
	return w.err
}

// end closes the chunked body so the client sees a clean end of stream.
func (w *sseWriter) end() {
	w.write("0\r\n\r\n")
	w.flush()
}

package topology_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/deploy/topology"
)

// The failover drills of deploy/README.md: the topology under SMTP and API
// load through haproxy while a node fails. `make test` runs the short
// ones (in this file); `make drill` (MAYFLY_DRILL=full) runs every drill longer and
// prints the table that deploy/README.md keeps.
//
// What every drill asserts, the product's promises:
//   - no message that got 250 is missing afterwards, none is stored twice;
//   - senders see only 4xx replies or dropped connections while it lasts,
//     never a 5xx (which would bounce the mail) and never a hang;
//   - the API never answers 500;
//   - a client that follows the event stream as the spec tells clients
//     (on any end it reconnects, here with Last-Event-ID too, and then lists
//     the messages) learns of every stored message, by an event or by that
//     list;
//   - the window of 4xx / 503 answers stays within the target (5 s, the
//     cluster-node-timeout of 2 s included).

// drillEnv are the settings of a drill's nodes: load far above the per-IP
// limits (every sender is 127.0.0.1), room for every message, and for every
// creation and live inbox of the drills' flows and API mix (a partition
// drill's mix creates ~1,000 inboxes from 127.0.0.1; at a limit of 1,000 a
// day its last creations were refused 429, answers the mix notes as odd).
// The networks' limits follow the client's (never below them).
var drillEnv = []string{
	"MAYFLY_SMTP_CONN_PER_MINUTE=1000000", "MAYFLY_SMTP_MAIL_PER_MINUTE=1000000",
	"MAYFLY_SMTP_SESSIONS_PER_IP=10000", "MAYFLY_SMTP_SESSIONS_PER_NET=10000", "MAYFLY_RATE_REQUESTS_PER_SECOND=1000000",
	"MAYFLY_RATE_CREATE_PER_MINUTE=1000000", "MAYFLY_RATE_CREATE_PER_HOUR=1000000",
	"MAYFLY_RATE_CREATE_PER_DAY=1000000", "MAYFLY_RATE_ACTIVE_PER_IP=1000000",
	"MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE=1000000",
	"MAYFLY_MAILBOX_MAX_MESSAGES=100000", "MAYFLY_MAILBOX_MAX_BYTES=1073741824",
	"MAYFLY_REDIS_TIMEOUT=1s",
	// An open stream reads what its mailbox stored at every heartbeat (a
	// lost publication is caught up there): a drill's streams do so every
	// 2 s, so "events missed" counts what that catch-up did not repair.
	"MAYFLY_EVENTS_HEARTBEAT=2s",
	// haproxy's per-source limits (deploy/haproxy/haproxy.cfg): every drill
	// client is 127.0.0.1.
	"MAYFLY_LB_HTTP_CONNS_PER_IP=100000", "MAYFLY_LB_HTTP_CONNS_PER_IP_HARD=100000",
	"MAYFLY_LB_HTTP_REQ_RATE=10000000", "MAYFLY_LB_SMTP_CONNS_PER_IP=100000", "MAYFLY_LB_SMTP_CONN_RATE=10000000",
	"MAYFLY_LB_HTTP_CONNS_PER_NET=100000", "MAYFLY_LB_HTTP_CONNS_PER_NET_HARD=100000", "MAYFLY_LB_SMTP_CONNS_PER_NET=100000",
}

// failoverTarget is the target for the window of 4xx / 503 answers;
// make drill holds every drill to it. The short drill of `make test` fails
// only past ciFailoverBound: on a loaded 2-core CI machine the same failover
// has measured 3.8-5.3 s, and a red CI over a few hundred milliseconds of
// scheduling would say nothing about the product.
const (
	failoverTarget  = 5 * time.Second
	ciFailoverBound = 8 * time.Second
)

func failoverBound() time.Duration {
	if drillFull() {
		return failoverTarget
	}
	return ciFailoverBound
}

type drillConfig struct {
	senders   int
	mailboxes int
	before    time.Duration // load before the fault
	after     time.Duration // load after the fault
}

func drillFull() bool { return os.Getenv("MAYFLY_DRILL") == "full" }

func config() drillConfig {
	if drillFull() {
		return drillConfig{senders: 12, mailboxes: 24, before: 3 * time.Second, after: 15 * time.Second}
	}
	return drillConfig{senders: 8, mailboxes: 9, before: 2 * time.Second, after: 8 * time.Second}
}

// window records the first and last time something happened.
type window struct {
	mu          sync.Mutex
	first, last time.Time
	n           int
}

func (w *window) add(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 || t.Before(w.first) {
		w.first = t
	}
	if t.After(w.last) {
		w.last = t
	}
	w.n++
}

func (w *window) seconds() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return 0
	}
	return w.last.Sub(w.first).Seconds()
}

// drill is one run: mailboxes with their users and event streams, senders,
// pollers, and what they saw.
type drill struct {
	t   *testing.T
	tp  *topology.Topology
	cfg drillConfig

	boxes []*box

	sent, accepted   atomic.Int64
	permanent        atomic.Int64 // 5xx replies
	hangs            atomic.Int64 // attempts that did not end within their deadline
	http500          atomic.Int64
	smtpTemp, api503 window
	acceptedMu       sync.Mutex
	acceptedSubject  map[string]string // subject → mailbox address
	notes            []string
	temps, lastTemps []string
	faultAt          time.Time
	bound            time.Duration // of the refusal windows, when not failoverBound()
	settleFrom       int           // streams opened when the load had stopped (streamSettle)
	tempsBySecond    map[int]int   // temporary SMTP failures by whole seconds since the fault
	// smtpFails, apiFails: when each SMTP temporary failure and API 503
	// happened, since the fault (bounded).
	smtpFails, apiFails []time.Duration
	// mix, when not nil, is API write load run beside the SMTP load and
	// checked with it (drill_api_test.go).
	mix *apiMix
}

type box struct {
	u       *user
	addr    string
	mu      sync.Mutex
	events  map[string]int  // message id → times received as an event
	listed  map[string]bool // message ids read by the list after a (re)connect
	lastID  string
	streams int // streams opened (1 + reconnects)
	// needList: the client's stream ended (or never opened) while the drill
	// ran, so the next stream it opens is followed by a message list.
	needList bool
}

func newDrill(t *testing.T, env ...string) *drill {
	d := &drill{t: t, cfg: config(), acceptedSubject: map[string]string{}}
	d.tp = topology.Start(t, append(append([]string{}, drillEnv...), env...)...)
	for range d.cfg.mailboxes {
		u := newUser(t, d.tp.HTTPURL)
		d.boxes = append(d.boxes, &box{u: u, addr: u.open(), events: map[string]int{}, listed: map[string]bool{}, needList: true})
	}
	return d
}

// run starts the load, calls fault after cfg.before, keeps the load for
// cfg.after, then stops it and waits until the cluster is whole. The event
// streams stay open for streamSettle after that, as a client's stream
// would: see streamSettle.
func (d *drill) run(fault func()) {
	ctx, cancel := context.WithCancel(context.Background())
	streamCtx, stopStreams := context.WithCancel(context.Background())
	var wg, streams sync.WaitGroup
	for _, b := range d.boxes {
		streams.Go(func() { d.stream(streamCtx, b) })
	}
	var seq atomic.Int64
	for range d.cfg.senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := seq.Add(1)
				d.deliver(ctx, d.boxes[int(n)%len(d.boxes)].addr, fmt.Sprintf("drill-%d", n))
			}
		})
	}
	wg.Go(func() { d.poll(ctx) })
	if d.mix != nil {
		wg.Go(func() { d.mix.run(ctx) })
	}
	time.Sleep(d.cfg.before)
	d.acceptedMu.Lock() // poll and tempNote read it under the lock
	d.faultAt = time.Now()
	d.acceptedMu.Unlock()
	fault()
	time.Sleep(d.cfg.after)
	cancel()
	wg.Wait()
	d.tp.WaitClusterOK(30 * time.Second)
	d.settleFrom = d.streamsOpened()
	time.Sleep(streamSettle)
	stopStreams()
	streams.Wait()
}

// streamsOpened counts the event streams the drill's clients have opened.
func (d *drill) streamsOpened() int {
	n := 0
	for _, b := range d.boxes {
		b.mu.Lock()
		n += b.streams
		b.mu.Unlock()
	}
	return n
}

// streamSettle is how long the drill's event streams stay open once the
// load has stopped and the cluster is whole: two heartbeats (drillEnv's 2 s;
// a stream reads its mailbox at each, and the first may still meet the
// cluster's refusal) plus a second for a reconnect and its list. The
// streams stay the ones the drill opened: a stream opened anew here would
// start from Last-Event-ID, which may name a message that the promoted
// replica never had (published by the cut-off primary, whose write was then
// refused and retried under another id), so that stream would start at the
// end and list nothing, which is not what a client whose stream never ended
// meets: its stream ends at the next heartbeat, and it lists.
const streamSettle = 2*2*time.Second + time.Second

// deliver sends one message as an MTA would: a new connection per attempt,
// and the same bytes again after any 4xx or dropped connection, until a 250
// (or a 5xx, or the drill ends).
func (d *drill) deliver(ctx context.Context, to, subject string) {
	d.sent.Add(1)
	msg := []byte("From: drill@example.org\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + subject + "@drill.example.org>\r\n\r\nbody of " + subject + "\r\n")
	for ctx.Err() == nil {
		start := time.Now()
		code, err := sendOnce(d.tp.SMTPAddr, to, msg, 15*time.Second)
		if time.Since(start) > 12*time.Second {
			d.hangs.Add(1)
		}
		switch {
		case err == nil:
			d.accepted.Add(1)
			d.acceptedMu.Lock()
			d.acceptedSubject[subject] = to
			d.acceptedMu.Unlock()
			return
		case code >= 500:
			d.permanent.Add(1)
			d.note(fmt.Sprintf("5xx for %s: %v", subject, err))
			return
		default: // 4xx or a dropped connection: retry
			d.smtpTemp.add(time.Now())
			d.tempNote(err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sendOnce is one SMTP transaction on a new connection; code is the reply
// code of a refusal (0: the connection failed or dropped).
func sendOnce(addr, to string, msg []byte, deadline time.Duration) (int, error) {
	return sendVia(func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 2*time.Second) }, to, msg, deadline)
}

// sendVia is sendOnce on a connection from dial.
func sendVia(dial func() (net.Conn, error), to string, msg []byte, deadline time.Duration) (int, error) {
	conn, err := dial()
	if err != nil {
		return 0, err
	}
	_ = conn.SetDeadline(time.Now().Add(deadline))
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		conn.Close()
		return codeOf(err), err
	}
	defer c.Close()
	if err := c.Mail("drill@example.org"); err != nil {
		return codeOf(err), err
	}
	if err := c.Rcpt(to); err != nil {
		return codeOf(err), err
	}
	w, err := c.Data()
	if err != nil {
		return codeOf(err), err
	}
	if _, err := w.Write(msg); err != nil {
		return codeOf(err), err
	}
	if err := w.Close(); err != nil {
		return codeOf(err), err
	}
	_ = c.Quit()
	return 250, nil
}

func codeOf(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// poll reads every mailbox's message list in turn, as clients do, and
// records the API's failures.
func (d *drill) poll(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		b := d.boxes[i%len(d.boxes)]
		req, _ := http.NewRequestWithContext(ctx, "GET", d.tp.HTTPURL+"/messages?limit=1", nil)
		res, err := b.u.http.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				d.api503.add(time.Now()) // a refused connection counts as unavailability
			}
			continue
		}
		res.Body.Close()
		switch res.StatusCode {
		case 500:
			d.http500.Add(1)
		case 503:
			d.api503.add(time.Now())
			d.acceptedMu.Lock()
			if !d.faultAt.IsZero() && len(d.apiFails) < 100000 {
				d.apiFails = append(d.apiFails, time.Since(d.faultAt))
			}
			d.acceptedMu.Unlock()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stream keeps an event stream open on b as the spec tells clients: on any
// end, reconnect after a short backoff (with Last-Event-ID, which the spec
// does not promise to honour), and once the stream is open, list the
// messages. The end of ctx is the drill stopping its clients.
func (d *drill) stream(ctx context.Context, b *box) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.tp.HTTPURL+"/events", nil)
		b.mu.Lock()
		if b.lastID != "" {
			req.Header.Set("Last-Event-ID", b.lastID)
		}
		b.streams++
		b.mu.Unlock()
		res, err := (&http.Client{Jar: b.u.http.Jar}).Do(req)
		if err == nil && res.StatusCode == 200 {
			b.mu.Lock()
			need := b.needList
			b.mu.Unlock()
			if need {
				// The stream is open: what arrives from now on comes as an
				// event, so this list covers everything before.
				d.listAfterOpen(ctx, b)
			}
			readEvents(res.Body, func(id string) {
				b.mu.Lock()
				b.events[id]++
				b.lastID = id
				b.mu.Unlock()
			})
		}
		if ctx.Err() == nil {
			b.mu.Lock()
			b.needList = true
			b.mu.Unlock()
		}
		d.discard(res)
		pause(ctx, 300*time.Millisecond)
	}
}

// discard closes an answer the drill does not read, counting a 500.
func (d *drill) discard(res *http.Response) {
	if res == nil {
		return
	}
	if res.StatusCode == 500 {
		d.http500.Add(1)
	}
	res.Body.Close()
}

// pause waits for dur or until ctx ends.
func pause(ctx context.Context, dur time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(dur):
	}
}

// listAfterOpen reads every message of b (retrying a failed page until it
// is answered or ctx ends) and records their ids as listed.
func (d *drill) listAfterOpen(ctx context.Context, b *box) {
	ids := map[string]bool{}
	for offset := 0; ctx.Err() == nil; {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.tp.HTTPURL+"/messages?limit=100&offset="+strconv.Itoa(offset), nil)
		res, err := b.u.http.Do(req)
		if err != nil || res.StatusCode != 200 {
			d.discard(res)
			pause(ctx, 200*time.Millisecond)
			continue
		}
		var l struct {
			Data struct {
				Items      []struct{ ID string }
				Pagination struct {
					HasMore bool `json:"has_more"`
				}
			}
		}
		err = json.NewDecoder(res.Body).Decode(&l)
		res.Body.Close()
		if err != nil {
			continue
		}
		for _, it := range l.Data.Items {
			ids[it.ID] = true
		}
		if !l.Data.Pagination.HasMore {
			b.mu.Lock()
			for id := range ids {
				b.listed[id] = true
			}
			b.needList = false
			b.mu.Unlock()
			return
		}
		offset += 100
	}
}

type result struct {
	name                                   string
	sent, accepted, lost, dups, perm, hang int64
	http500                                int64
	smtpWindow, apiWindow                  float64
	missedEvents, streams                  int
	// listedOnly: stored messages the clients learned of only by the list
	// after a reconnect (no event carried them).
	listedOnly int
	// phantoms: events for messages that were never stored: published by
	// a primary whose write was then refused (the sender retried, and the
	// retry stored the message under another id).
	phantoms int
	// api: the drill ran the API writes (drill_api_test.go), and after the
	// heal found sessionsLost sessions that got 200 answering 401, msgsBack
	// deleted messages and boxesBack deleted inboxes back.
	api                               bool
	sessionsLost, msgsBack, boxesBack int
	// odd: answers to the API writes that no client should get (each is
	// noted, up to 20), during the drill or after the heal.
	odd int
}

// tableHeader is the header of the drill table (deploy/README.md), row one
// of its rows.
const tableHeader = "| drill | sent | accepted | lost after 250 | duplicates | 5xx | s of SMTP 4xx/drops | s of API 503 | HTTP 500 | events missed | stream reconnects | sessions 200 then 401 | deleted messages back | deleted inboxes back |"

func (r result) row() string {
	api := "– | – | –"
	if r.api {
		api = fmt.Sprintf("%d | %d | %d", r.sessionsLost, r.msgsBack, r.boxesBack)
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %.1f | %.1f | %d | %d | %d | %s |",
		r.name, r.sent, r.accepted, r.lost, r.dups, r.perm, r.smtpWindow, r.apiWindow, r.http500, r.missedEvents, r.streams, api)
}

// check reads every mailbox back through haproxy and compares.
func (d *drill) check(name string) result {
	reconnects := d.streamsOpened() - len(d.boxes)
	r := result{streams: reconnects, name: name, sent: d.sent.Load(), accepted: d.accepted.Load(), perm: d.permanent.Load(),
		hang: d.hangs.Load(), http500: d.http500.Load(), smtpWindow: d.smtpTemp.seconds(), apiWindow: d.api503.seconds()}
	stored := map[string]int{} // subject → copies
	for _, b := range d.boxes {
		ids := map[string]bool{}
		for offset := 0; ; offset += 100 {
			var l struct {
				Data struct {
					Items      []struct{ ID, Subject string }
					Pagination struct {
						HasMore bool `json:"has_more"`
					}
				}
			}
			if code := b.u.do("GET", "/messages?limit=100&offset="+strconv.Itoa(offset), "", &l); code != 200 {
				d.t.Fatalf("reading %s back: %d", b.addr, code)
			}
			for _, it := range l.Data.Items {
				stored[it.Subject]++
				ids[it.ID] = true
			}
			if !l.Data.Pagination.HasMore {
				break
			}
		}
		b.mu.Lock()
		for id := range ids {
			switch {
			case b.events[id] > 0:
			case b.listed[id]:
				r.listedOnly++
			default:
				r.missedEvents++
			}
		}
		for id := range b.events {
			if !ids[id] {
				r.phantoms++
			}
		}
		b.mu.Unlock()
	}
	var lost []string
	d.acceptedMu.Lock()
	for subject := range d.acceptedSubject {
		if stored[subject] == 0 {
			lost = append(lost, subject)
		}
	}
	d.acceptedMu.Unlock()
	for _, subject := range lost { // note takes acceptedMu
		r.lost++
		d.note("lost after 250: " + subject)
	}
	for subject, n := range stored {
		if n > 1 {
			r.dups += int64(n - 1)
			d.note(fmt.Sprintf("stored %d times: %s", n, subject))
		}
	}
	if d.mix != nil {
		d.mix.check(&r)
	}
	report(d.t, r)
	ended, gone := d.tp.EdgeCounter("mayfly_events_streams_node_changed_total")
	d.t.Logf("drill events | %d stored messages reached their client only by the list after a reconnect | %.0f streams ended by the edges because another Redis node answered for the mailbox (%d edges killed, not counted) | %d reconnects after the load stopped | %d events for messages never stored |",
		r.listedOnly, ended, gone, d.streamsOpened()-d.settleFrom, r.phantoms)
	d.acceptedMu.Lock()
	var secs []int
	for sec := range d.tempsBySecond {
		secs = append(secs, sec)
	}
	sort.Ints(secs)
	var hist []string
	for _, sec := range secs {
		hist = append(hist, fmt.Sprintf("+%ds:%d", sec, d.tempsBySecond[sec]))
	}
	d.acceptedMu.Unlock()
	d.t.Logf("drill SMTP 4xx/drops by second since the fault: %s", strings.Join(hist, " "))
	return r
}

// tempNote keeps the first and the latest temporary failures, with their
// time since the fault, to explain a long window.
func (d *drill) tempNote(err error) {
	d.acceptedMu.Lock()
	defer d.acceptedMu.Unlock()
	since := time.Since(d.faultAt)
	line := fmt.Sprintf("+%.1fs %v", since.Seconds(), err)
	if !d.faultAt.IsZero() {
		if d.tempsBySecond == nil {
			d.tempsBySecond = map[int]int{}
		}
		d.tempsBySecond[int(since/time.Second)]++
		if len(d.smtpFails) < 100000 {
			d.smtpFails = append(d.smtpFails, since)
		}
	}
	if len(d.temps) < 3 {
		d.temps = append(d.temps, line)
	} else {
		d.lastTemps = append(d.lastTemps[max(0, len(d.lastTemps)-2):], line)
	}
}

func (d *drill) note(s string) {
	d.acceptedMu.Lock()
	defer d.acceptedMu.Unlock()
	if len(d.notes) < 20 {
		d.notes = append(d.notes, s)
	}
}

// assert fails the drill on any broken promise.
func (d *drill) assert(r result) {
	t := d.t
	for _, n := range d.notes {
		t.Log(n)
	}
	if r.accepted == 0 {
		t.Errorf("no message accepted at all")
	}
	if r.lost != 0 || r.dups != 0 {
		t.Errorf("%d lost after 250, %d duplicates; want 0 and 0", r.lost, r.dups)
	}
	if r.perm != 0 || r.hang != 0 {
		t.Errorf("%d permanent (5xx) replies, %d hung attempts; want none", r.perm, r.hang)
	}
	if r.http500 != 0 {
		t.Errorf("%d HTTP 500; want none", r.http500)
	}
	if r.missedEvents != 0 {
		t.Errorf("%d stored messages reached their client neither as an event nor by the list after a reconnect", r.missedEvents)
	}
	if r.sessionsLost != 0 || r.msgsBack != 0 || r.boxesBack != 0 {
		t.Errorf("after the heal %d sessions that got 200 answered 401, %d deleted messages and %d deleted inboxes were back; want 0, 0 and 0",
			r.sessionsLost, r.msgsBack, r.boxesBack)
	}
	if r.odd != 0 {
		t.Errorf("%d answers to the API writes that no client should get (the first are noted above); want none", r.odd)
	}
	bound := failoverBound()
	if d.bound > 0 {
		bound = d.bound
	}
	for _, w := range []float64{r.smtpWindow, r.apiWindow} {
		if w > bound.Seconds() {
			t.Errorf("failure window %.1fs; bound %v; SMTP failures: first %q, last %q", w, bound, d.temps, d.lastTemps)
			for line := range strings.Lines(d.tp.Logs("haproxy")) {
				if strings.Contains(line, " is DOWN") || strings.Contains(line, " is UP") {
					t.Log("haproxy: " + strings.TrimSpace(line))
				}
			}
		}
	}
}

var (
	reportMu sync.Mutex
	reported []result
)

// report logs one row and, with MAYFLY_DRILL_REPORT set, appends it to
// that file as a Markdown table row (make drill writes the table).
func report(t *testing.T, r result) {
	row := r.row()
	t.Log("drill " + strings.Replace(tableHeader, "| drill |", "| name |", 1))
	t.Log("drill " + row)
	reportMu.Lock()
	defer reportMu.Unlock()
	reported = append(reported, r)
	if f := os.Getenv("MAYFLY_DRILL_REPORT"); f != "" {
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(fh, row)
			fh.Close()
		}
	}
}

// A Redis primary killed with -9 under load: its replica takes over within
// the node timeout, and nothing accepted is lost. Runs in `make test` (short).
func TestDrillKillPrimary(t *testing.T) {
	d := newDrill(t)
	primary, _ := d.tp.PrimaryFor("mf:{" + strings.SplitN(d.boxes[0].addr, "@", 2)[0] + "}:box")
	pid := d.tp.RedisPID(primary)
	d.run(func() { d.tp.Kill(pid) })
	d.assert(d.check("kill -9 a Redis primary"))
}

// A Redis primary cut off from its replica and from the cluster bus by
// iptables (Topology.Partition) while Mayfly's nodes still reach it: the
// minority partition that lost acknowledged messages while a lagging replica
// stopped being waited for. The cut primary's WAIT fails (451) until the
// majority promotes its replica; it heals after cut, rejoins as a replica
// and full-resyncs, dropping what it took during the cut, none of which was
// acknowledged. Runs in `make test` (short); `make drill` runs it longer,
// and MAYFLY_DRILL_PARTITION_RUNS times.
//
// Events: an edge whose event subscription (SSUBSCRIBE) sits on the cut
// primary is never told that the slot moved (the node is reachable, and
// becomes a replica of the new primary at the heal), so publications on the
// new primary in between are not pushed to that stream, and the cut primary
// may have sent it an entry the heal discards, with a stream id above
// entries the new primary stores. The first event or catch-up read answered
// by the new primary ends such a stream (another node's stream ids do not
// continue the history it sent); the client reconnects and lists, and the
// list has every stored message. "events missed" counts a stored message
// that reached its client neither way (deploy/README.md).
func TestDrillPartitionPrimary(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("the partition drill needs root (iptables, cgroups); CI runs it")
	}
	runs, _ := strconv.Atoi(os.Getenv("MAYFLY_DRILL_PARTITION_RUNS"))
	for i := range max(1, runs) {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) {
			d := newDrill(t)
			primary, replica := d.tp.PrimaryFor("mf:{" + strings.SplitN(d.boxes[0].addr, "@", 2)[0] + "}:box")
			d.partition("partition a Redis primary", primary, replica, 0, func() func() { return d.tp.Partition(primary) })
		})
	}
}

// A primary with two replicas, R1 and R2, split as {primary, R2} | {R1,
// the other primaries and their replicas}, while Mayfly's nodes reach every
// node: the majority promotes R1. A write acknowledged after WAIT 1 may
// have been answered by R2 alone, and is lost when the primary rejoins R1
// (storage waited for one replica whatever their number: the make drill
// before measured the loss, deploy/README.md). Storage now waits for every
// replica the cluster lists, so R1's silence refuses the write (451) until
// the cut primary stops taking writes; nothing acknowledged may be lost.
// Runs in `make test` (short) and `make drill`.
func TestDrillPartitionTwoReplicas(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("the partition drill needs root (iptables, cgroups); CI runs it")
	}
	d := newDrill(t, "MAYFLY_CLUSTER_REPLICAS=2")
	primary, _ := d.tp.PrimaryFor("mf:{" + strings.SplitN(d.boxes[0].addr, "@", 2)[0] + "}:box")
	replicas := d.tp.ReplicasOf(primary)
	if len(replicas) != 2 {
		t.Fatalf("%s has replicas %v, want 2", primary, replicas)
	}
	withPrimary, promoted := replicas[0], replicas[1]
	// The cut is 4 s longer: with two replicas the promotion can take
	// longer (a replica that may lag the other waits a second more to run
	// for election, and a lost election waits twice the node timeout). The
	// load goes on 5 s after the heal: the old primary rejoins as a replica
	// and the streams on it move to the new primary.
	longer := 4 * time.Second
	d.cfg.after = max(d.cfg.after, partitionLength()+longer+5*time.Second)
	d.partition("partition a primary with one of its 2 replicas", primary, promoted, longer,
		func() func() { return d.tp.PartitionGroup(primary, withPrimary) })
}

// partitionLength is how long a partition drill cuts, unless longer.
func partitionLength() time.Duration {
	if drillFull() {
		return 8 * time.Second
	}
	return 6 * time.Second
}

// partition runs the drill with the fault cut (which returns its heal),
// healed after partitionLength plus longer;
// checks that replica was promoted during
// the cut and primary ended as a replica; and asserts the promises, with
// every 250 counted as an acknowledged durable write. The refusal windows
// span the cut and the old primary's resync after it heals (its new
// primary waits for it again), so their bound is the cut plus the usual
// failover target.
func (d *drill) partition(name, primary, replica string, longer time.Duration, cut func() (heal func())) {
	t := d.t
	length := partitionLength() + longer
	d.bound = length + failoverBound()
	d.mix = newAPIMix(d)
	promoted := make(chan time.Duration, 1)
	d.run(func() {
		heal := cut()
		time.AfterFunc(length, heal)
		go func() { // when the replica is a primary, as it sees itself
			for start := time.Now(); time.Since(start) < length; time.Sleep(100 * time.Millisecond) {
				if role, _ := d.tp.Redis(replica, "ROLE"); strings.HasPrefix(role, "master") {
					promoted <- time.Since(start)
					return
				}
			}
		}()
	})
	select {
	case at := <-promoted:
		d.recovery(at, length)
	default:
		t.Errorf("the replica %s was not promoted during the %v cut", replica, length)
	}
	// The cut held: the majority failed the old primary over.
	if role, _ := d.tp.Redis(primary, "ROLE"); !strings.HasPrefix(role, "slave") {
		t.Errorf("the cut primary %s is still %q after the cut: the partition leaked", primary, strings.SplitN(role, "\n", 2)[0])
	}
	r := d.check(fmt.Sprintf("%s for %v", name, length))
	d.assert(r)
	d.mix.log(r)
	// The 250s of the API writes' stock messages are durable writes too.
	r.accepted += int64(d.mix.stocked)
	w := d.durableWrites(r)
	// Every 250 was a write acknowledged after a WAIT on the node that
	// stored it, or one stored where no replica was listed (the promoted
	// replica, until the old primary rejoins it).
	if got := w["acked_waited"] + w["acked_no_wait"]; got < float64(r.accepted) {
		t.Errorf("%v acknowledged writes for %d 250s", got, r.accepted)
	}
}

// recovery logs how soon after the promoted replica was visible (ROLE
// master, polled every 100 ms) the SMTP refusals and API 503s stopped,
// before the heal at cut.
func (d *drill) recovery(promoted, cut time.Duration) {
	d.acceptedMu.Lock()
	defer d.acceptedMu.Unlock()
	sum := func(fails []time.Duration) (last time.Duration, late int) {
		for _, f := range fails {
			if f < cut && f > last {
				last = f
			}
			if f > promoted+time.Second && f < cut {
				late++
			}
		}
		return last, late
	}
	ls, ns := sum(d.smtpFails)
	la, na := sum(d.apiFails)
	d.t.Logf("drill recovery | promoted at +%.1fs | last SMTP refusal before the heal +%.1fs, %d more than 1 s after promotion | last API 503 before the heal +%.1fs, %d more than 1 s after promotion |",
		promoted.Seconds(), ls.Seconds(), ns, la.Seconds(), na)
}

// durableWrites logs, and with MAYFLY_DRILL_REPORT appends to that file,
// the ingest nodes' mayfly_durable_writes_total beside the drill's 250s: how
// many were acknowledged after a WAIT answered by the node that ran the
// script (storage refuses any other), how many without a WAIT (no replica
// listed), refused, and redirected (MOVED/ASK, sent again to the new owner).
func (d *drill) durableWrites(r result) map[string]float64 {
	w := d.tp.DurableWrites()
	row := fmt.Sprintf("| %s | %d | %.0f | %.0f | %.0f | %.0f |", r.name, r.accepted,
		w["acked_waited"], w["acked_no_wait"], w["refused"], w["redirected"])
	d.t.Log("drill durable | name | 250s | acked after WAIT on the storing node | acked without WAIT (no replica listed) | refused (451) | redirected |")
	d.t.Log("drill durable " + row)
	if f := os.Getenv("MAYFLY_DRILL_REPORT"); f != "" {
		if fh, err := os.OpenFile(f+".durable", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(fh, row)
			fh.Close()
		}
	}
	return w
}

// One transaction stopped in the middle of DATA by the death of its ingest
// node: no 250, and the retry through haproxy stores it once.
func TestDrillKillIngestMidData(t *testing.T) {
	tp := topology.Start(t, drillEnv...)
	u := newUser(t, tp.HTTPURL)
	addr := u.open()
	msg := []byte("From: a@example.org\r\nTo: " + addr + "\r\nSubject: mid-data\r\nMessage-ID: <mid-data@example.org>\r\n\r\n" +
		strings.Repeat("a line of the body\r\n", 50))

	conn, err := net.DialTimeout("tcp", tp.SMTPAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("a@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(addr); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(msg[:len(msg)/2]); err != nil {
		t.Fatal(err)
	}
	// The node holding this session is the one with a session open.
	victim := -1
	for i, n := range tp.Ingests {
		if sessions(t, n.Admin) == 1 {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no ingest node reports the open session")
	}
	tp.Kill(tp.Ingests[victim].PID)
	_, werr := w.Write(msg[len(msg)/2:])
	cerr := w.Close()
	if werr == nil && cerr == nil {
		t.Fatal("the transaction was acknowledged although its node died mid-DATA")
	}
	c.Close()

	// The sender retries the same bytes; haproxy's check marks the dead
	// node down within about a second, and a connection that reaches it
	// before is refused, so retry until accepted.
	deadline := time.Now().Add(failoverTarget)
	for {
		code, err := sendOnce(tp.SMTPAddr, addr, msg, 10*time.Second)
		if err == nil {
			break
		}
		if code >= 500 || time.Now().After(deadline) {
			t.Fatalf("retry after the ingest died: %d %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// And once more, as a sender that never saw the 250 would.
	if _, err := sendOnce(tp.SMTPAddr, addr, msg, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := len(u.list().Data.Items); got != 1 {
		t.Fatalf("%d copies stored, want exactly 1", got)
	}
}

// sessions reads mayfly_smtp_sessions_open from an ingest's admin listener.
func sessions(t *testing.T, admin string) int {
	res, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "mayfly_smtp_sessions_open "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	t.Fatal("no mayfly_smtp_sessions_open metric")
	return 0
}

// TestMain prints the table of every drill that ran, sorted by name.
func TestMain(m *testing.M) {
	code := m.Run()
	if len(reported) > 0 {
		sort.Slice(reported, func(i, j int) bool { return reported[i].name < reported[j].name })
		fmt.Println(tableHeader)
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range reported {
			fmt.Println(r.row())
		}
	}
	os.Exit(code)
}

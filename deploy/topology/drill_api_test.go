package topology_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The API writes of the partition drills (issue 34): beside the SMTP load,
// clients select inboxes, delete messages and delete inboxes through
// haproxy, and once the cut has healed the drill checks that nothing they
// were told is done came undone. A select, a DELETE /mailboxes/current or a
// DELETE /messages/{id} that a failover loses shows as:
//   - a session handed out with 200 that answers 401 while its inbox lives
//     (the official clients take a 401 for an inbox gone for good);
//   - a deleted message that GET /messages/{id} or the list shows again;
//   - a deleted inbox that its scoped cookie selects again, or whose address
//     is accepted at RCPT (550 wanted).
//
// A 503 or a dropped connection is retried after a backoff, never taken for
// a failure: the official clients retry a 503 on reads only and hand it
// back on a select or a delete, for their caller to retry, and the drill is
// that caller. A retried delete answered 404 (message) or 401 (inbox) is
// taken as done and checked like a 204: the Go client's Inbox.Delete takes
// a 401 for "already gone", and a caller retrying DeleteMessage after a 503
// takes its 404 so.

// apiMix is the API write load of one drill and what it was told.
type apiMix struct {
	d       *drill
	http    *http.Client
	workers int
	pace    time.Duration // between two operations of a worker
	stocked int           // messages delivered (250) to the kept inboxes

	mu          sync.Mutex
	kept        []*keptBox  // inboxes selected again and again, never deleted
	doomed      []doomedBox // inboxes made and selected, to be deleted, oldest first
	sessions    []*http.Cookie
	msgsDeleted []deletedMessage
	boxDeleted  []deletedBox

	// Acknowledged: selects answered 200, message and inbox deletes taken as
	// done, creations answered 201.
	selects, msgDeletes, boxDeletes, creations atomic.Int64
	unavailable                                atomic.Int64 // 503 answers to the mix's writes, each retried
	drops                                      atomic.Int64 // writes whose connection failed, each retried
	// churnLost: a session just handed out (200) that the delete of its
	// inbox, at its first attempt, found invalid (401).
	churnLost atomic.Int64
	// msgsRetried, boxesRetried: deletes taken as done after a 503 or a
	// failed connection (a 404 or 401 to the retry, or a 204).
	msgsRetried, boxesRetried atomic.Int64
	noStock                   atomic.Int64 // message deletes skipped: no message left
	unexpected                atomic.Int64 // answers no client should get; each noted
	w503                      window
}

// keptBox is an inbox the mix selects (each 200 a session checked after the
// heal) and deletes messages of; it is never deleted.
type keptBox struct {
	id, addr string
	scoped   *http.Cookie
	// session is the one opened when the mix made the box (before the
	// fault): message deletes and the checks use it.
	session *http.Cookie
	// selects counts select attempts, 503s included, the first one too:
	// past maxSessions the oldest session would be revoked, a 401 that is
	// no loss.
	selects int
	stock   []string // ids of messages not yet deleted
}

// maxSessions is storage's default sessions per mailbox (the oldest past it
// is revoked).
const maxSessions = 16

type deletedMessage struct {
	box *keptBox
	id  string
}

type deletedBox struct {
	id, addr string
	scoped   *http.Cookie
}

// doomedBox is an inbox made and selected, waiting for its delete.
type doomedBox struct {
	deletedBox
	session *http.Cookie
}

// answer is one HTTP answer; code 0 is a failed connection, -1 a request
// not sent (the load ended, or no select left for the inbox).
type answer struct {
	code    int
	body    []byte
	cookies []*http.Cookie
}

// newAPIMix makes the inboxes the mix selects and deletes messages of, each
// with stock messages delivered through haproxy, before the drill's load.
func newAPIMix(d *drill) *apiMix {
	m := &apiMix{d: d, workers: 4, pace: 20 * time.Millisecond,
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	boxes, stock, doomed := 10, 50, 40
	if drillFull() {
		m.workers, boxes, stock, doomed = 6, 12, 80, 60
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range boxes {
		b, ok := m.newKept(ctx)
		if !ok {
			d.t.Fatal("api mix: could not create its inboxes")
		}
		a, _ := m.selectKept(ctx, b)
		if a.code != 200 {
			d.t.Fatalf("api mix: select = %d %s", a.code, a.body)
		}
		b.session = sessionCookie(a.cookies)
		if err := prefill(d.tp.SMTPAddr, b.addr, stock); err != nil {
			d.t.Fatalf("api mix: delivering to %s: %v", b.addr, err)
		}
		ids, code := m.listAll(ctx, b.session)
		if code != 200 || len(ids) != stock {
			d.t.Fatalf("api mix: %s lists %d messages (%d), want %d", b.addr, len(ids), code, stock)
		}
		for id := range ids {
			b.stock = append(b.stock, id)
		}
		m.stocked += stock
	}
	for range doomed {
		if !m.doom(ctx) {
			d.t.Fatal("api mix: could not create its inboxes to delete")
		}
	}
	return m
}

// prefill delivers n messages to addr on one SMTP connection.
func prefill(smtpAddr, to string, n int) error {
	c, err := smtp.Dial(smtpAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := range n {
		if err := c.Mail("drill@example.org"); err != nil {
			return err
		}
		if err := c.Rcpt(to); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "From: drill@example.org\r\nTo: %s\r\nSubject: stock %d\r\n\r\nto be deleted\r\n", to, i)
		if err := w.Close(); err != nil {
			return err
		}
	}
	return c.Quit()
}

// run is the load of m.workers clients, each turning through a select of a
// kept inbox, a message delete and an inbox's delete (with a new one made
// and selected), m.pace apart, until ctx ends.
func (m *apiMix) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := range m.workers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				switch i % 3 {
				case 0:
					m.selectOne(ctx)
				case 1:
					m.deleteMessage(ctx)
				case 2:
					m.deleteInbox(ctx)
				}
				pause(ctx, m.pace)
			}
		})
	}
	wg.Wait()
}

// call sends one request with cookies.
func (m *apiMix) call(ctx context.Context, method, path, body string, cookies ...*http.Cookie) answer {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, m.d.tp.HTTPURL+path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, err := m.http.Do(req)
	if err != nil {
		return answer{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == 500 {
		m.d.http500.Add(1)
	}
	return answer{code: res.StatusCode, body: b, cookies: res.Cookies()}
}

// write sends a write as a client does: a 503 or a failed connection is
// retried after a backoff (full jitter, 100 ms doubling to 1 s) until
// another answer comes or ctx ends (code -1). before, when not nil, runs
// before each attempt and may refuse it (code -1). retried says whether an
// attempt before the answer was a 503 or a failed connection: the write may
// have been done then.
func (m *apiMix) write(ctx context.Context, before func() bool, method, path, body string, cookies ...*http.Cookie) (a answer, retried bool) {
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || before != nil && !before() {
			return answer{code: -1}, retried
		}
		a = m.call(ctx, method, path, body, cookies...)
		switch {
		case a.code == 503:
			m.unavailable.Add(1)
			m.w503.add(time.Now())
		case a.code == 0 && ctx.Err() == nil:
			m.drops.Add(1)
		case a.code == 0:
			return answer{code: -1}, retried
		default:
			return a, retried
		}
		retried = true
		pause(ctx, rand.N(min(100*time.Millisecond<<attempt, time.Second))+time.Millisecond)
	}
}

// odd notes an answer no client should get.
func (m *apiMix) odd(what string, a answer) {
	m.unexpected.Add(1)
	m.d.note(fmt.Sprintf("api mix: %s = %d %.200s", what, a.code, a.body))
}

// create makes an inbox: its id, address and scoped cookie.
func (m *apiMix) create(ctx context.Context) (id, addr string, scoped *http.Cookie, ok bool) {
	a, _ := m.write(ctx, nil, "POST", "/mailboxes", "{}")
	if a.code != 201 {
		if a.code != -1 {
			m.odd("POST /mailboxes", a)
		}
		return "", "", nil, false
	}
	m.creations.Add(1)
	var mb mailboxReply
	if err := json.Unmarshal(a.body, &mb); err != nil {
		m.odd("POST /mailboxes body", a)
		return "", "", nil, false
	}
	for _, c := range a.cookies {
		if c.Name != "service_session" && c.Value != "" {
			scoped = c
		}
	}
	if scoped == nil {
		m.odd("POST /mailboxes without a scoped cookie", a)
		return "", "", nil, false
	}
	return mb.Data.Mailbox.ID, mb.Data.Mailbox.Address, scoped, true
}

// newKept creates a kept inbox and adds it to m.kept.
func (m *apiMix) newKept(ctx context.Context) (*keptBox, bool) {
	id, addr, scoped, ok := m.create(ctx)
	if !ok {
		return nil, false
	}
	b := &keptBox{id: id, addr: addr, scoped: scoped}
	m.mu.Lock()
	m.kept = append(m.kept, b)
	m.mu.Unlock()
	return b, true
}

// selectKept selects b with its scoped cookie, each attempt taking one of
// its maxSessions; a 200 is recorded as a session to check.
func (m *apiMix) selectKept(ctx context.Context, b *keptBox) (answer, bool) {
	room := func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if b.selects >= maxSessions {
			return false
		}
		b.selects++
		return true
	}
	a, retried := m.write(ctx, room, "POST", "/mailboxes/"+b.id+"/select", "", b.scoped)
	switch {
	case a.code == 200 && sessionCookie(a.cookies) != nil:
		m.selects.Add(1)
		m.mu.Lock()
		m.sessions = append(m.sessions, sessionCookie(a.cookies))
		m.mu.Unlock()
	case a.code != -1:
		m.odd("select of a kept inbox", a)
	}
	return a, retried
}

// selectOne selects a kept inbox with sessions to spare, made anew when none
// has.
func (m *apiMix) selectOne(ctx context.Context) {
	m.mu.Lock()
	var room []*keptBox
	for _, b := range m.kept {
		if b.selects < maxSessions-2 { // 2 spare: a select may be retried
			room = append(room, b)
		}
	}
	m.mu.Unlock()
	var b *keptBox
	if len(room) > 0 {
		b = room[rand.N(len(room))]
	} else {
		var ok bool
		if b, ok = m.newKept(ctx); !ok {
			return
		}
	}
	m.selectKept(ctx, b)
}

// deleteMessage deletes one stock message of a kept inbox.
func (m *apiMix) deleteMessage(ctx context.Context) {
	m.mu.Lock()
	var with []*keptBox
	for _, b := range m.kept {
		if len(b.stock) > 0 {
			with = append(with, b)
		}
	}
	if len(with) == 0 {
		m.mu.Unlock()
		m.noStock.Add(1)
		return
	}
	b := with[rand.N(len(with))]
	id := b.stock[len(b.stock)-1]
	b.stock = b.stock[:len(b.stock)-1]
	m.mu.Unlock()
	a, retried := m.write(ctx, nil, "DELETE", "/messages/"+id, "", b.session)
	switch {
	case a.code == 204 || a.code == 404 && retried:
		m.msgDeletes.Add(1)
		if retried {
			m.msgsRetried.Add(1)
		}
		m.mu.Lock()
		m.msgsDeleted = append(m.msgsDeleted, deletedMessage{box: b, id: id})
		m.mu.Unlock()
	case a.code != -1:
		m.odd("DELETE /messages/{id}", a)
	}
}

// doom makes and selects an inbox to delete later, at the end of m.doomed.
func (m *apiMix) doom(ctx context.Context) bool {
	id, addr, scoped, ok := m.create(ctx)
	if !ok {
		return false
	}
	sel, _ := m.write(ctx, nil, "POST", "/mailboxes/"+id+"/select", "", scoped)
	session := sessionCookie(sel.cookies)
	if sel.code != 200 || session == nil {
		if sel.code != -1 {
			m.odd("select of a new inbox", sel)
		}
		return false
	}
	m.selects.Add(1)
	m.mu.Lock()
	m.doomed = append(m.doomed, doomedBox{deletedBox{id: id, addr: addr, scoped: scoped}, session})
	m.mu.Unlock()
	return true
}

// deleteInbox is a turn of inboxes' short lives: one is made and selected,
// and the oldest of m.doomed is deleted. The inboxes wait their turn for a
// few seconds, so those deleted during the cut were made before it: none
// can be made on the cut shard, a creation being a durable write.
func (m *apiMix) deleteInbox(ctx context.Context) {
	m.doom(ctx)
	m.mu.Lock()
	if len(m.doomed) == 0 {
		m.mu.Unlock()
		return
	}
	x := m.doomed[0]
	m.doomed = m.doomed[1:]
	m.mu.Unlock()
	a, retried := m.write(ctx, nil, "DELETE", "/mailboxes/current", "", x.session)
	switch {
	case a.code == 204 || a.code == 401 && retried:
		m.boxDeletes.Add(1)
		if retried {
			m.boxesRetried.Add(1)
		}
		m.mu.Lock()
		m.boxDeleted = append(m.boxDeleted, x.deletedBox)
		m.mu.Unlock()
	case a.code == 401:
		m.churnLost.Add(1)
		m.d.note(fmt.Sprintf("api mix: the session select gave %s answered 401 to its first DELETE /mailboxes/current", x.id))
	case a.code != -1:
		m.odd("DELETE /mailboxes/current", a)
	}
}

func sessionCookie(cookies []*http.Cookie) *http.Cookie {
	for _, c := range cookies {
		if c.Name == "service_session" && c.Value != "" {
			return c
		}
	}
	return nil
}

// listAll reads every message id of the session's inbox; code is the
// answer that ended it (200 when every page was read).
func (m *apiMix) listAll(ctx context.Context, session *http.Cookie) (map[string]bool, int) {
	ids := map[string]bool{}
	for offset := 0; ; offset += 100 {
		a := m.read(ctx, "/messages?limit=100&offset="+strconv.Itoa(offset), session)
		if a.code != 200 {
			return ids, a.code
		}
		var l struct {
			Data struct {
				Items      []struct{ ID string }
				Pagination struct {
					HasMore bool `json:"has_more"`
				}
			}
		}
		if err := json.Unmarshal(a.body, &l); err != nil {
			return ids, 0
		}
		for _, it := range l.Data.Items {
			ids[it.ID] = true
		}
		if !l.Data.Pagination.HasMore {
			return ids, 200
		}
	}
}

// read is a GET as the clients send it: 500, 503 and failed connections
// retried with a backoff, at most 8 attempts.
func (m *apiMix) read(ctx context.Context, path string, session *http.Cookie) answer {
	var a answer
	for attempt := range 8 {
		if a = m.call(ctx, "GET", path, "", session); a.code != 0 && a.code != 500 && a.code != 503 {
			return a
		}
		pause(ctx, min(100*time.Millisecond<<attempt, time.Second))
	}
	return a
}

// check reads back, with the cluster whole, what the mix was told, and
// fills r's counts.
func (m *apiMix) check(r *result) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	r.api = true
	for _, s := range m.sessions {
		switch a := m.read(ctx, "/mailboxes/current", s); a.code {
		case 200:
		case 401:
			r.sessionsLost++
		default:
			m.odd("GET /mailboxes/current after the heal", a)
		}
	}
	r.sessionsLost += int(m.churnLost.Load())
	byBox := map[*keptBox][]string{}
	for _, x := range m.msgsDeleted {
		byBox[x.box] = append(byBox[x.box], x.id)
	}
	for b, deleted := range byBox {
		listed, code := m.listAll(ctx, b.session)
		if code != 200 {
			m.odd("GET /messages of a kept inbox after the heal", answer{code: code})
			continue
		}
		for _, id := range deleted {
			a := m.read(ctx, "/messages/"+id, b.session)
			if a.code != 404 && a.code != 200 {
				m.odd("GET /messages/{id} of a deleted message after the heal", a)
			}
			if a.code == 200 || listed[id] {
				r.msgsBack++
				m.d.note(fmt.Sprintf("api mix: message %s of %s deleted (204), back after the heal: GET %d, listed %v", id, b.addr, a.code, listed[id]))
			}
		}
	}
	for _, x := range m.boxDeleted {
		sel, _ := m.write(ctx, nil, "POST", "/mailboxes/"+x.id+"/select", "", x.scoped)
		rcpt := rcptCode(ctx, m.d.tp.SMTPAddr, x.addr)
		if sel.code == 200 || rcpt == 250 {
			r.boxesBack++
			m.d.note(fmt.Sprintf("api mix: inbox %s deleted (204), back after the heal: select %d, RCPT %d", x.addr, sel.code, rcpt))
		}
		if rcpt != 250 && rcpt != 550 {
			m.odd("RCPT to a deleted inbox after the heal", answer{code: rcpt})
		}
	}
	r.odd = int(m.unexpected.Load())
}

// rcptCode is the reply to RCPT TO addr (250 accepted, 550 no such
// mailbox), a 4xx or a failed connection retried up to 10 times.
func rcptCode(ctx context.Context, smtpAddr, addr string) int {
	code := 0
	for range 10 {
		code = rcptOnce(smtpAddr, addr)
		if code != 0 && code < 400 || code >= 500 {
			return code
		}
		pause(ctx, 200*time.Millisecond)
	}
	return code
}

func rcptOnce(smtpAddr, addr string) int {
	conn, err := net.DialTimeout("tcp", smtpAddr, 2*time.Second)
	if err != nil {
		return 0
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		conn.Close()
		return codeOf(err)
	}
	defer c.Close()
	if err := c.Mail("drill@example.org"); err != nil {
		return codeOf(err)
	}
	err = c.Rcpt(addr)
	_ = c.Quit()
	if err != nil {
		return codeOf(err)
	}
	return 250
}

// log logs, and with MAYFLY_DRILL_REPORT appends to that file's .api, what
// the mix was told and the edges' durable writes.
func (m *apiMix) log(r result) {
	w := edgeDurableWrites(m.d)
	row := fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %.1f | %d | %d | %d | %.0f | %.0f | %.0f |", r.name,
		m.selects.Load(), m.msgDeletes.Load(), m.boxDeletes.Load(), m.creations.Load(), m.unavailable.Load(), m.w503.seconds(),
		r.sessionsLost, r.msgsBack, r.boxesBack, w["acked_waited"], w["acked_no_wait"], w["refused"])
	m.d.t.Log("drill api | name | selects 200 | message deletes done | inbox deletes done | creations 201 | 503s retried | s of write 503 | sessions 200 then 401 | deleted messages back | deleted inboxes back | edges: acked after WAIT | acked without WAIT | refused (503) |")
	m.d.t.Log("drill api " + row)
	m.d.t.Logf("drill api | %d sessions checked | %d message and %d inbox deletes done after a 503 | %d failed connections retried | %d sessions of inboxes to delete 401 at their delete | %d message deletes skipped (no stock) | %d unexpected answers |",
		len(m.sessions), m.msgsRetried.Load(), m.boxesRetried.Load(), m.drops.Load(), m.churnLost.Load(), m.noStock.Load(), m.unexpected.Load())
	appendReport(".api", row)
}

// edgeDurableWrites sums mayfly_durable_writes_total{outcome} over the
// edges that answer: creations, and (since they are durable) selects,
// extensions and deletes.
func edgeDurableWrites(d *drill) map[string]float64 {
	out := map[string]float64{}
	for _, n := range d.tp.Edges {
		res, err := http.Get("http://" + n.Admin + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for line := range strings.Lines(string(b)) {
			rest, ok := strings.CutPrefix(line, `mayfly_durable_writes_total{outcome="`)
			if !ok {
				continue
			}
			outcome, value, _ := strings.Cut(strings.TrimSpace(rest), `"} `)
			v, _ := strconv.ParseFloat(value, 64)
			out[outcome] += v
		}
	}
	return out
}

// appendReport appends row to the file MAYFLY_DRILL_REPORT names, suffixed.
func appendReport(suffix, row string) {
	if f := os.Getenv("MAYFLY_DRILL_REPORT"); f != "" {
		if fh, err := os.OpenFile(f+suffix, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(fh, row)
			fh.Close()
		}
	}
}

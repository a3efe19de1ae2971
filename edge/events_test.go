package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// sseEvent is one parsed event or comment of a stream.
type sseEvent struct {
	event, id, data, comment, retry string
}

// stream is an open GET /events read by a goroutine.
type stream struct {
	resp   *http.Response
	events chan sseEvent
	ended  chan struct{} // closed when the body ends (EOF or error)
	mu     sync.Mutex
	raw    strings.Builder
	endErr error // why the body ended: io.EOF for a clean end of the chunked body
}

// openStream opens GET /events with u's jar; extra headers as pairs.
func (u *user) openStream(headers ...string) (*stream, *result) {
	u.e.t.Helper()
	req, _ := http.NewRequest("GET", u.e.base+"/events", nil)
	ip := u.ip
	if ip == "" {
		ip = randomIP()
	}
	req.Header.Set("X-Forwarded-For", ip)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := *u.hc
	hc.Timeout = 0 // a stream lasts
	resp, err := hc.Do(req)
	if err != nil {
		u.e.t.Fatalf("GET /events: %v", err)
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		var raw strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&raw)
		checkResponse(u.e.t, req, resp, []byte(raw.String()))
		r := &result{status: resp.StatusCode, header: resp.Header, raw: []byte(raw.String())}
		json.Unmarshal(r.raw, &r.body)
		return nil, r
	}
	checkResponse(u.e.t, req, resp, nil)
	s := &stream{resp: resp, events: make(chan sseEvent, 100), ended: make(chan struct{})}
	u.e.t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(s.ended)
		br := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			s.mu.Lock()
			s.raw.WriteString(line)
			if err != nil {
				s.endErr = err
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{comment: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ": ")
				switch k {
				case "event":
					ev.event = v
				case "id":
					ev.id = v
				case "data":
					ev.data = v
				case "retry":
					ev.retry = v
				}
			}
		}
	}()
	return s, nil
}

// next returns the next event that is not a comment.
func (s *stream) next(t *testing.T, within time.Duration) sseEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-s.events:
			if ev.comment == "" && ev.retry == "" {
				return ev
			}
		case <-s.ended:
			select {
			case ev := <-s.events:
				if ev.comment == "" && ev.retry == "" {
					return ev
				}
				continue
			default:
			}
			t.Fatalf("stream ended while waiting for an event")
		case <-deadline:
			t.Fatalf("no event within %v", within)
		}
	}
}

// quiet asserts no event arrives within d.
func (s *stream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-s.events:
			if ev.comment == "" && ev.retry == "" {
				t.Fatalf("unexpected event %+v", ev)
			}
		case <-deadline:
			return
		}
	}
}

// waitEnd asserts the server ends the stream within d.
func (s *stream) waitEnd(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(d):
		t.Fatalf("stream still open after %v", d)
	}
}

func (s *stream) check(t *testing.T) {
	s.mu.Lock()
	raw := s.raw.String()
	s.mu.Unlock()
	checkResponse(t, s.resp.Request, s.resp, []byte(raw))
}

func assertMessageEvent(t *testing.T, ev sseEvent, want storage.Summary) {
	t.Helper()
	if ev.event != "message.received" || ev.id != want.ID.String() {
		t.Fatalf("event %+v, want message.received id %s", ev, want.ID)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
		t.Fatalf("data %q: %v", ev.data, err)
	}
	if want.To == "" {
		t.Fatalf("delivered summary %+v has no To", want)
	}
	for k, v := range map[string]string{"id": want.ID.String(), "to": want.To, "from": want.From, "subject": want.Subject, "status": "ready",
		"received_at": want.ReceivedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")} {
		if data[k] != v {
			t.Errorf("data.%s = %v, want %q", k, data[k], v)
		}
	}
	if len(data) != 6 {
		t.Errorf("data has %d fields, want the 6 of a MessageSummary (the spec's 5 and to): %s", len(data), ev.data)
	}
}

func TestEventsDeliveredAndScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u, other := e.newUser(""), e.newUser("")
	m := u.open()
	om := other.open()
	s, _ := u.openStream()
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if s.resp.Header.Get("Cache-Control") != "no-cache" || s.resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("headers = %v", s.resp.Header)
	}
	first := <-s.events
	if n, err := strconv.Atoi(first.retry); err != nil || n < 1000 || n >= 6000 {
		t.Errorf("first field = %+v, want retry: <1000-5999>", first)
	}
	e.deliver(om["address"].(string), "not yours")
	msg := e.deliver(m["address"].(string), "424242")
	assertMessageEvent(t, s.next(t, 5*time.Second), msg)
	s.quiet(t, 300*time.Millisecond)
	// The spec's flow still works: the list has the message.
	if r := u.do("GET", "/messages", ""); !strings.Contains(string(r.raw), msg.ID.String()) {
		t.Errorf("list lacks the message: %s", r.raw)
	}
	s.check(t)
}

func TestEventsNeedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.MaxStreams = 1 })
	u := e.newUser("")
	_, r := u.openStream()
	u.want(r, 401, "MAILBOX_SESSION_REQUIRED")
	u.open()
	s, _ := u.openStream()
	v := e.newUser("")
	v.open()
	_, r = v.openStream()
	u.want(r, 503, "REQUEST_PROTECTION")
	if ra := r.header.Get("Retry-After"); ra != "1" && ra != "2" && ra != "3" {
		t.Errorf("Retry-After = %q, want 1, 2 or 3", ra)
	}
	u.want(u.do("DELETE", "/mailboxes/current", ""), 204, "")
	s.waitEnd(t, 2*time.Second)
	_, r = u.openStream()
	u.want(r, 401, "MAILBOX_SESSION_REQUIRED")
}

func TestEventsNewestWinsAcrossNodes(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	b := a.sibling(t) // a second edge node on the same Redis keys
	u := a.newUser("")
	m := u.open()
	first, _ := u.openStream()
	<-first.events // retry
	// The same jar reconnects through the other node.
	ub := &user{e: b, hc: u.hc}
	second, _ := ub.openStream()
	first.waitEnd(t, time.Second)
	// It says why it ended, so a client can tell another stream from a
	// node going away (and not take the stream back at once).
	first.mu.Lock()
	raw := first.raw.String()
	first.mu.Unlock()
	if !strings.Contains(raw, "\n: replaced by a newer stream on this inbox\n\n") {
		t.Errorf("the replaced stream ended without the replaced comment:\n%s", raw)
	}
	msg := a.deliver(m["address"].(string), "to the newest")
	assertMessageEvent(t, second.next(t, 5*time.Second), msg)
	// And back: a third stream on node a ends the one on node b.
	third, _ := u.openStream()
	second.waitEnd(t, time.Second)
	msg = a.deliver(m["address"].(string), "again")
	assertMessageEvent(t, third.next(t, 5*time.Second), msg)
}

// A client that goes away is noticed within about a second, not at the
// next heartbeat: its stream ends and the node drops its subscription (the
// shard's SSUBSCRIBE count falls to zero) although no heartbeat is due.
func TestEventsVanishedClientNoticedPromptly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = time.Minute })
	u := e.newUser("")
	m := u.open()
	s, _ := u.openStream()
	channel := e.store.Channel(storage.TagOf(m["address"].(string)))
	subscribers := func() int64 {
		res, err := e.client.Do(context.Background(), e.client.B().PubsubShardnumsub().Channel(channel).Build()).ToArray()
		if err != nil || len(res) != 2 {
			t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", res, err)
		}
		n, _ := res[1].AsInt64()
		return n
	}
	deadline := time.Now().Add(2 * time.Second)
	for subscribers() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the stream never subscribed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.resp.Body.Close() // the client goes away
	closedAt := time.Now()
	for subscribers() != 0 {
		if time.Since(closedAt) > 3*time.Second {
			t.Fatalf("the node still holds the gone client's stream after %v (heartbeat: 1 minute)", time.Since(closedAt))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A session revoked by the 17th select loses its open event stream at once,
// as it loses /messages: mailbox access is rechecked during the stream.
func TestEventsEndWhenSessionRevoked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	m := u.open()
	s, _ := u.openStream() // with the first session
	for range 15 {         // sessions 2..16: the first one still counts
		u.want(u.do("POST", "/mailboxes/"+m["id"].(string)+"/select", ""), 200, "")
	}
	s.quiet(t, 300*time.Millisecond)
	u.want(u.do("POST", "/mailboxes/"+m["id"].(string)+"/select", ""), 200, "") // the 17th revokes the first
	s.waitEnd(t, 2*time.Second)
	// The newest session's stream is unaffected.
	s2, _ := u.openStream()
	s2.quiet(t, 300*time.Millisecond)
}

func TestEventsEndOnDeleteAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	u.open()
	s, _ := u.openStream()
	u.want(u.do("DELETE", "/mailboxes/current", ""), 204, "")
	s.waitEnd(t, time.Second)

	v, m := e.shortLived(1500 * time.Millisecond)
	s2, _ := v.openStream()
	select {
	case <-s2.ended:
		t.Fatal("stream ended before the mailbox expired")
	case <-time.After(time.Until(m.ExpiresAt) - 300*time.Millisecond):
	}
	s2.waitEnd(t, time.Until(m.ExpiresAt)+time.Second)
}

func TestEventsExtensionMovesDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v, m := e.shortLived(1500 * time.Millisecond)
	s, _ := v.openStream()
	v.want(v.do("PATCH", "/mailboxes/current", `{"extension_minutes": 1}`), 200, "")
	select {
	case <-s.ended:
		t.Fatal("stream ended at the old expiry despite the extension")
	case <-time.After(time.Until(m.ExpiresAt) + time.Second):
	}
}

func TestEventsHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = 100 * time.Millisecond })
	u := e.newUser("")
	u.open()
	s, _ := u.openStream()
	pings := 0
	deadline := time.After(2 * time.Second)
	for pings < 3 {
		select {
		case ev := <-s.events:
			if ev.comment == "ping" {
				pings++
			}
		case <-deadline:
			t.Fatalf("%d heartbeats in 2 s at a 100 ms interval", pings)
		}
	}
}

func TestEventsReplayAfterLastEventID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	m := u.open()
	addr := m["address"].(string)
	seen := e.deliver(addr, "seen")
	missed1 := e.deliver(addr, "missed 1")
	missed2 := e.deliver(addr, "missed 2")
	s, _ := u.openStream("Last-Event-ID", seen.ID.String())
	assertMessageEvent(t, s.next(t, 2*time.Second), missed1)
	assertMessageEvent(t, s.next(t, 2*time.Second), missed2)
	s.quiet(t, 300*time.Millisecond)
	live := e.deliver(addr, "live")
	assertMessageEvent(t, s.next(t, 5*time.Second), live)

	// An unknown Last-Event-ID replays nothing: the stream starts now.
	s2, _ := u.openStream("Last-Event-ID", "00000000-0000-4000-8000-000000000000")
	s2.quiet(t, 300*time.Millisecond)
	s2.check(t)
}

func TestEventsReconnectsAreRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.newUser("")
	u.open()
	var limited int
	e.inOneWindow(500*time.Millisecond, func(ip string) {
		u.ip = ip // the reconnects alone count against this IP
		limited = 0
		for range 9 {
			s, r := u.openStream()
			if r != nil {
				if r.status == 429 && r.code() == "RATE_LIMITED" {
					limited++
				} else {
					t.Fatalf("reconnect: %d %s", r.status, r.raw)
				}
			} else {
				s.resp.Body.Close()
			}
		}
	})
	if limited != 1 {
		t.Errorf("%d of 9 reconnects in one second were limited, want 1 (8 per second)", limited)
	}
}

func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var streams []*stream
	for range 5 {
		u := e.newUser("")
		u.open()
		s, _ := u.openStream()
		streams = append(streams, s)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown with open streams took %v", d)
	}
	for _, s := range streams {
		s.waitEnd(t, time.Second)
	}
}

// TestEventsLostPublicationCaughtUp: a message stored without its
// publication reaching the stream (as when the stream's subscription sits on
// a primary cut off from the cluster while the promoted replica stores the
// deliveries) still reaches the open stream within a heartbeat.
func TestEventsLostPublicationCaughtUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = 200 * time.Millisecond })
	u := e.newUser("")
	m := u.open()
	s, _ := u.openStream()
	<-s.events // retry
	addr := m["address"].(string)
	published := e.deliver(addr, "published")
	assertMessageEvent(t, s.next(t, 5*time.Second), published)
	// The same entry the delivery script wrote, under another id and
	// subject, added without a publication.
	key := e.prefix + ":{" + strings.SplitN(addr, "@", 2)[0] + "}:msgs"
	ctx := context.Background()
	entries, err := e.client.Do(ctx, e.client.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(entries) != 1 {
		t.Fatalf("XRANGE %s: %v %v", key, entries, err)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(entries[0].FieldValues["j"]), &sum); err != nil {
		t.Fatal(err)
	}
	id := uuid.New().String()
	sum["id"], sum["subject"] = id, "never published"
	j, _ := json.Marshal(sum)
	if err := e.client.Do(ctx, e.client.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("j", string(j)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if ev := s.next(t, 3*time.Second); !strings.Contains(ev.data, id) || !strings.Contains(ev.data, "never published") {
		t.Fatalf("event %+v, want the unpublished message %s", ev, id)
	}
}

// publishMessageEvent publishes on the mailbox's channel a message event for
// a message that is not stored, as deliver.lua would on node (no "node"
// field when node is "": the payload of a node older than that field).
func (e *env) publishMessageEvent(addr, sid, node string) uuid.UUID {
	e.t.Helper()
	id := uuid.New()
	payload := `{"type":"message","sid":"` + sid + `",`
	if node != "" {
		payload += `"node":"` + node + `",`
	}
	payload += `"summary":{"id":"` + id.String() + `","from":"ghost@example.org","subject":"fabricated","status":"ready"}}`
	ch := e.store.Channel(storage.TagOf(addr))
	if err := e.client.Do(context.Background(), e.client.B().Spublish().Channel(ch).Message(payload).Build()).Error(); err != nil {
		e.t.Fatalf("SPUBLISH: %v", err)
	}
	return id
}

// awaitSubscribed waits until n edge subscriptions listen on the mailbox's
// channel, so that a publication from now on reaches them.
func (e *env) awaitSubscribed(addr string, n int64) {
	e.t.Helper()
	ch := e.store.Channel(storage.TagOf(addr))
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := e.client.Do(context.Background(), e.client.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
		if err != nil || len(res) != 2 {
			e.t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", res, err)
		}
		got, _ := res[1].AsInt64()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d subscriptions on %s, want %d", got, ch, n)
		}
	}
}

// farSID is a stream id far past any the test cluster will assign.
func farSID() string { return strconv.FormatInt(time.Now().Add(24*time.Hour).UnixMilli(), 10) + "-0" }

// TestEventsEndWhenAnotherNodePublishes: stream ids order one Redis node's
// history only. A message event published by another node than the one the
// stream's history came from (after a failover: the cut-off primary
// published a delivery the heal discarded, with an id above those the
// promoted replica stores) must end the stream, so that the client
// reconnects and lists instead of waiting, after that id, for messages whose
// ids are below it. Without that, the real message below is never sent: its
// event's id is below the fabricated one, and so is its catch-up read.
func TestEventsEndWhenAnotherNodePublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = 200 * time.Millisecond })
	u := e.newUser("")
	m := u.open()
	addr := m["address"].(string)
	s, _ := u.openStream()
	<-s.events // retry
	first := e.deliver(addr, "from the owner")
	assertMessageEvent(t, s.next(t, 5*time.Second), first)
	e.awaitSubscribed(addr, 1)

	ghost := e.publishMessageEvent(addr, farSID(), strings.Repeat("0", 39)+"1") // no node of the cluster
	stored := e.deliver(addr, "stored after the other node's event")
	s.waitEnd(t, 2*time.Second)
	s.mu.Lock()
	raw, endErr := s.raw.String(), s.endErr
	s.mu.Unlock()
	if endErr != io.EOF {
		t.Errorf("the stream ended with %v, want a clean end of its body (io.EOF)", endErr)
	}
	if strings.Contains(raw, ghost.String()) {
		t.Errorf("the other node's event was sent before the end:\n%s", raw)
	}
	if strings.Contains(raw, "replaced") {
		t.Errorf("a node change ended the stream with the replaced comment (clients would pause a minute):\n%s", raw)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "another Redis node answers for the mailbox") {
		t.Errorf("no log line for the node change:\n%s", logs)
	}

	// The client reconnects and lists, as the spec says: the list has the
	// real message, and the new stream carries the next one.
	s2, _ := u.openStream()
	<-s2.events // retry
	r := u.do("GET", "/messages", "")
	u.want(r, 200, "")
	if !strings.Contains(string(r.raw), stored.ID.String()) {
		t.Errorf("the list after the reconnect lacks the message stored after the node change: %s", r.raw)
	}
	if strings.Contains(string(r.raw), ghost.String()) {
		t.Errorf("the list has the fabricated message: %s", r.raw)
	}
	next := e.deliver(addr, "on the new stream")
	assertMessageEvent(t, s2.next(t, 5*time.Second), next)
}

// TestEventsOldNodePayloadKeepsStream: a message event without a node id (a
// node of an older version published it, during a rolling upgrade) is
// "node unknown", not "another node": the stream forwards it and stays open.
func TestEventsOldNodePayloadKeepsStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat = 200 * time.Millisecond })
	u := e.newUser("")
	m := u.open()
	addr := m["address"].(string)
	s, _ := u.openStream()
	<-s.events // retry
	e.awaitSubscribed(addr, 1)
	old := e.publishMessageEvent(addr, farSID(), "")
	if ev := s.next(t, 5*time.Second); ev.id != old.String() {
		t.Fatalf("event %+v, want the old node's message %s", ev, old)
	}
	// Heartbeats (catch-up reads, answered by the mailbox's node) come and go.
	select {
	case <-s.ended:
		t.Fatal("an event without a node id ended the stream")
	case <-time.After(time.Second):
	}
	if logs := e.logs.String(); strings.Contains(logs, "another Redis node answers for the mailbox") {
		t.Errorf("a node change was logged for an event without a node id:\n%s", logs)
	}
}

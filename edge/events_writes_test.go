package edge_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// streamTimes sets the node's heartbeat and write timeout.
func streamTimes(heartbeat, write time.Duration) option {
	return func(c *edge.Config, _ *ratelimit.Config) { c.Heartbeat, c.WriteTimeout = heartbeat, write }
}

// awaitPing waits for the next heartbeat comment, dropping what was queued
// before, so that the caller's clock starts at a heartbeat.
func (s *stream) awaitPing(t *testing.T, within time.Duration) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-s.events:
		default:
			drained = true
		}
	}
	deadline := time.After(within)
	for {
		select {
		case ev := <-s.events:
			if ev.comment == "ping" {
				return
			}
		case <-s.ended:
			t.Fatalf("stream ended while waiting for a heartbeat")
		case <-deadline:
			t.Fatalf("no heartbeat within %v", within)
		}
	}
}

// awaitMessage waits for the event of message id; an error says why none
// came: the stream ended, or nothing within the time given.
func (s *stream) awaitMessage(id uuid.UUID, within time.Duration) error {
	deadline := time.After(within)
	for {
		select {
		case ev := <-s.events:
			if ev.id == id.String() {
				return nil
			}
		case <-s.ended:
			select {
			case ev := <-s.events:
				if ev.id == id.String() {
					return nil
				}
				continue
			default:
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			return fmt.Errorf("the stream ended (%v)", s.endErr)
		case <-deadline:
			return fmt.Errorf("no event within %v", within)
		}
	}
}

// sizedSubject is a subject, distinct for each n, that makes a
// message.received event line of about size bytes.
func sizedSubject(n, size int) string {
	p := strconv.Itoa(n) + " "
	return p + strings.Repeat("x", max(size-230-len(p), 1))
}

// storeUnpublished adds to the mailbox's stream, without a publication, a
// copy of its last entry under a new id and subject: a message whose
// publication was lost, which only a catch-up read finds.
func (e *env) storeUnpublished(addr, subject string) uuid.UUID {
	e.t.Helper()
	key := e.prefix + ":{" + strings.SplitN(addr, "@", 2)[0] + "}:msgs"
	ctx := context.Background()
	entries, err := e.client.Do(ctx, e.client.B().Xrevrange().Key(key).End("+").Start("-").Count(1).Build()).AsXRange()
	if err != nil || len(entries) != 1 {
		e.t.Fatalf("XREVRANGE %s: %v %v", key, entries, err)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(entries[0].FieldValues["j"]), &sum); err != nil {
		e.t.Fatal(err)
	}
	id := uuid.New()
	sum["id"], sum["subject"] = id.String(), subject
	j, _ := json.Marshal(sum)
	if err := e.client.Do(ctx, e.client.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("j", string(j)).Build()).Error(); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestEventsLargeEventsAtEveryPhase: an event, whatever its size, reaches an
// open stream whenever it comes in the heartbeat period, and so does one
// that the heartbeat's catch-up reads. Every write of a stream has a
// deadline of its own; a deadline set at the last flush had passed for an
// event longer than the stream's 1 KiB buffer, which then failed at once
// and ended the stream, when it came more than the write timeout after a
// flush (issue 34: 10-20 s into the 20 s heartbeat period).
func TestEventsLargeEventsAtEveryPhase(t *testing.T) {
	t.Parallel()
	const heartbeat, phases = 1600 * time.Millisecond, 8
	for _, size := range []int{512, 2 << 10, 64 << 10} {
		t.Run(strconv.Itoa(size)+"B", func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, streamTimes(heartbeat, heartbeat/4))
			u := e.newUser("")
			addr := u.open()["address"].(string)
			s, _ := u.openStream()
			var lost []string
			for i := range phases {
				phase := heartbeat * time.Duration(i) / phases
				s.awaitPing(t, 10*heartbeat)
				time.Sleep(phase) // the phase is what is tested: no condition to await
				msg := e.deliver(addr, sizedSubject(i, size))
				if err := s.awaitMessage(msg.ID, 10*time.Second); err != nil {
					lost = append(lost, fmt.Sprintf("%v after a heartbeat: %v", phase, err))
					s, _ = u.openStream()
				}
			}
			s.awaitPing(t, 10*heartbeat)
			id := e.storeUnpublished(addr, sizedSubject(phases, size))
			if err := s.awaitMessage(id, 2*heartbeat+10*time.Second); err != nil {
				lost = append(lost, "read by the heartbeat's catch-up: "+err.Error())
			}
			if len(lost) > 0 {
				t.Errorf("%d-byte events not delivered (%d of %d):\n%s", size, len(lost), phases+1, strings.Join(lost, "\n"))
			}
			if got := e.metric("mayfly_events_write_timeouts_total"); got != 0 {
				t.Errorf("mayfly_events_write_timeouts_total = %v, want 0: the client reads", got)
			}
		})
	}
}

// stalledReplay opens GET /events with a Last-Event-ID whose replay (about
// 1 MB) is far more than the socket takes, on an Internet-sized path (an
// MSS of 1,400 bytes) with a small receive buffer, and never reads: a client
// that stopped reading during its replay. It returns that connection and
// the user, whose jar holds the mailbox's session.
func (e *env) stalledReplay(t *testing.T) (net.Conn, *user) {
	t.Helper()
	u := e.newUser("")
	addr := u.open()["address"].(string)
	seen := e.deliver(addr, "seen")
	for i := range 60 {
		e.deliver(addr, sizedSubject(i, 16<<10))
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) {
			if err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1400); err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}
		})
		return cmp.Or(cerr, err)
	}}
	base := mustURL(e.base)
	conn, err := d.Dial("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var cookies []string
	for _, c := range u.hc.Jar.Cookies(mustURL(e.base + "/events")) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	if _, err := fmt.Fprintf(conn, "GET %s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nCookie: %s\r\nX-Forwarded-For: %s\r\nLast-Event-ID: %s\r\n\r\n",
		base.Path, base.Host, strings.Join(cookies, "; "), randomIP(), seen.ID); err != nil {
		t.Fatal(err)
	}
	return conn, u
}

// awaitClosed reads conn to its end, which must come within d: the node
// closed the stream (a reset counts: the node may close with bytes unsent).
func awaitClosed(t *testing.T, conn net.Conn, d time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the stalled client's connection is still open after %v: %v", d, err)
	}
}

// TestEventsStalledReplayTimesOut: a client that stops reading during its
// Last-Event-ID replay is ended within the write timeout, counted and logged
// (issue 34: the replay had no write deadline and held its stream for good).
func TestEventsStalledReplayTimesOut(t *testing.T) {
	t.Parallel()
	const writeTimeout = 2 * time.Second
	e := newEnv(t, streamTimes(time.Minute, writeTimeout))
	conn, u := e.stalledReplay(t)
	opened := time.Now()
	e.awaitMetric("mayfly_events_streams_open", 1, 5*time.Second)
	took := e.awaitMetric("mayfly_events_streams_open", 0, writeTimeout+10*time.Second)
	t.Logf("the stalled stream ended %v after it opened (write timeout %v)", took, writeTimeout)
	if d := time.Since(opened); d > writeTimeout+5*time.Second {
		t.Errorf("the stalled stream ended %v after it opened, want about the write timeout (%v)", d, writeTimeout)
	}
	if got := e.metric("mayfly_events_write_timeouts_total"); got != 1 {
		t.Errorf("mayfly_events_write_timeouts_total = %v, want 1", got)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "event stream ended: its client took no data for the write timeout") || !strings.Contains(logs, `"during":"replay"`) {
		t.Errorf("no log line for the write timeout during the replay:\n%s", logs)
	}
	for _, c := range u.hc.Jar.Cookies(mustURL(e.base)) {
		if strings.Contains(logs, c.Value) {
			t.Errorf("the log has the value of cookie %s:\n%s", c.Name, logs)
		}
	}
	awaitClosed(t, conn, 5*time.Second)
}

// subscribedWithin reports whether n edge subscriptions listen on the
// mailbox's channel within d.
func (e *env) subscribedWithin(addr string, n int64, d time.Duration) bool {
	e.t.Helper()
	ch := e.store.Channel(storage.TagOf(addr))
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		res, err := e.client.Do(context.Background(), e.client.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
		if err != nil || len(res) != 2 {
			e.t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", res, err)
		}
		if got, _ := res[1].AsInt64(); got == n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestEventsStalledReplayTakenOver: a stream stalled in its replay has
// joined the mailbox's subscription, so a newer stream for the inbox ends
// it at once (newest wins), without waiting for its write timeout.
func TestEventsStalledReplayTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamTimes(time.Minute, time.Minute))
	conn, u := e.stalledReplay(t)
	e.awaitMetric("mayfly_events_streams_open", 1, 5*time.Second)
	addr := u.do("GET", "/mailboxes/current", "").data("mailbox")["address"].(string)
	if !e.subscribedWithin(addr, 1, 5*time.Second) {
		t.Errorf("the stalled stream has not subscribed after 5 s: no takeover reaches it")
	}
	second, _ := u.openStream()
	took := e.awaitMetric("mayfly_events_streams_open", 1, 5*time.Second)
	t.Logf("the stalled stream ended %v after the second opened", took)
	awaitClosed(t, conn, 5*time.Second)
	select {
	case <-second.ended:
		t.Fatal("the newer stream ended")
	default:
	}
	msg := e.deliver(addr, "to the newer stream")
	assertMessageEvent(t, second.next(t, 5*time.Second), msg)
	if got := e.metric("mayfly_events_write_timeouts_total"); got != 0 {
		t.Errorf("mayfly_events_write_timeouts_total = %v, want 0: a takeover is no write timeout", got)
	}
}

// TestEventsStalledReplayEndsOnDelete: the mailbox's deletion reaches a
// stream stalled in its replay and ends it at once, as a revocation would.
func TestEventsStalledReplayEndsOnDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamTimes(time.Minute, time.Minute))
	conn, u := e.stalledReplay(t)
	e.awaitMetric("mayfly_events_streams_open", 1, 5*time.Second)
	addr := u.do("GET", "/mailboxes/current", "").data("mailbox")["address"].(string)
	if !e.subscribedWithin(addr, 1, 5*time.Second) {
		t.Errorf("the stalled stream has not subscribed after 5 s: no deletion reaches it")
	}
	u.want(u.do("DELETE", "/mailboxes/current", ""), 204, "")
	took := e.awaitMetric("mayfly_events_streams_open", 0, 5*time.Second)
	t.Logf("the stalled stream ended %v after the deletion", took)
	awaitClosed(t, conn, 5*time.Second)
}

// TestEventsStalledReplayShutdown: a stream stalled in its replay does not
// hold up the node's shutdown.
func TestEventsStalledReplayShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, streamTimes(time.Minute, time.Minute))
	conn, _ := e.stalledReplay(t)
	e.awaitMetric("mayfly_events_streams_open", 1, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := e.srv.Shutdown(ctx)
	took := time.Since(start)
	t.Logf("Shutdown took %v", took)
	if err != nil {
		t.Fatalf("Shutdown: %v (after %v)", err, took)
	}
	if took > 3*time.Second {
		t.Errorf("Shutdown with a stalled replay took %v", took)
	}
	awaitClosed(t, conn, 5*time.Second)
}

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// TestDrain stops a `mayfly all` node as SIGTERM does (run's context ends)
// and follows the drain from outside, on its real listeners: /readyz answers
// 503 "draining" at once while /healthz stays 200; for MAYFLY_DRAIN_DELAY
// the node keeps serving (API requests on kept and new connections, new
// SMTP sessions and new transactions on open ones all succeed, the event
// stream stays open), its API answers closing their connections;
// then its HTTP and SMTP listeners close, the event stream ends cleanly
// with a retry hint, an SMTP transfer that was mid-DATA throughout gets its
// 250, a session between transactions gets 421 at its next command, and
// run returns nil.
func TestDrain(t *testing.T) {
	t.Parallel()
	const drain = 3 * time.Second
	env := testEnv(t, map[string]string{
		"MAYFLY_REDIS_PREFIX":     storagetest.Prefix(t),
		"MAYFLY_HTTP_ADDR":        "127.0.0.1:0",
		"MAYFLY_SMTP_ADDR":        "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":       "127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE":    "false",
		"MAYFLY_DRAIN_DELAY":      drain.String(),
		"MAYFLY_SHUTDOWN_TIMEOUT": "10s",
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"all"}, func(k string) string { return env[k] }, io.Discard, logw)
		logw.Close()
	}()
	addrs := listeningAddrs(t, logs, "http", "smtp", "admin")
	api, admin := "http://"+addrs["http"]+"/v1", "http://"+addrs["admin"]

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	var created struct {
		Data struct {
			Mailbox struct{ ID, Address string }
		}
	}
	call(t, client, "POST", api+"/mailboxes", "{}", http.StatusCreated, &created)
	mb := created.Data.Mailbox
	call(t, client, "POST", api+"/mailboxes/"+mb.ID+"/select", "", http.StatusOK, nil)

	// The event stream, read to its end.
	events, err := (&http.Client{Jar: jar}).Get(api + "/events")
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %v %v", err, events)
	}
	type streamEnd struct {
		body string
		err  error
		at   time.Time
	}
	ended := make(chan streamEnd, 1)
	go func() {
		b, err := io.ReadAll(events.Body)
		ended <- streamEnd{string(b), err, time.Now()}
	}()

	// A transfer in progress for the whole drain, and a session between
	// transactions.
	msg := "From: a@example.org\r\nTo: " + mb.Address + "\r\nSubject: drain\r\n\r\n" + strings.Repeat("a line of the body\r\n", 20)
	inData := dialSMTP(t, addrs["smtp"])
	if err := inData.Mail("a@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := inData.Rcpt(mb.Address); err != nil {
		t.Fatal(err)
	}
	data, err := inData.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(data, msg[:len(msg)/2]); err != nil {
		t.Fatal(err)
	}
	between := dialSMTP(t, addrs["smtp"])

	kept := func() *http.Response { // a request on client's keep-alive connection
		t.Helper()
		res, err := client.Get(api + "/messages")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	if res := kept(); res.Close {
		t.Fatal("an answer before the drain closed its connection")
	}

	stopped := time.Now()
	cancel() // what SIGTERM does: main's signal.NotifyContext ends run's context

	// /readyz answers 503 at once; /healthz still 200.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body := status(t, admin+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "draining") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q 1 s after the stop signal, want 503 draining", code, body)
		}
	}
	if code, _ := status(t, admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while draining, want 200 (the process is alive)", code)
	}

	// Still serving: a kept connection (whose answer now closes it, so
	// that the client's next request goes through the load balancer
	// again), new API connections, a new SMTP session, a new transaction
	// on an open one.
	if res := kept(); res.StatusCode != http.StatusOK || !res.Close {
		t.Errorf("GET /messages on a kept connection while draining: %d, Connection: close %v; want 200 and close", res.StatusCode, res.Close)
	}
	fresh := &http.Client{Jar: jar, Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		call(t, fresh, "GET", api+"/messages", "", http.StatusOK, nil)
	}
	if err := smtp.SendMail(addrs["smtp"], nil, "b@example.org", []string{mb.Address}, []byte("Subject: during the drain\r\n\r\nhi\r\n")); err != nil {
		t.Errorf("a new SMTP session during the drain: %v", err)
	}
	if err := transaction(between, mb.Address, "Subject: on an open session\r\n\r\nhi\r\n"); err != nil {
		t.Errorf("a transaction on an open session during the drain: %v", err)
	}
	select {
	case e := <-ended:
		t.Fatalf("the event stream ended %v into the drain (%v)", e.at.Sub(stopped), e.err)
	default:
	}
	if served := time.Since(stopped); served >= drain {
		t.Fatalf("the checks during the drain took %v, more than the drain (%v): too slow a machine to tell", served, drain)
	}

	// Then the listeners close, no sooner than the drain delay.
	closedAt := waitRefused(t, addrs["http"], drain+5*time.Second)
	waitRefused(t, addrs["smtp"], time.Second)
	if got := closedAt.Sub(stopped); got < drain {
		t.Errorf("the HTTP listener closed %v after the stop signal, before the drain delay %v", got, drain)
	}
	select {
	case e := <-ended:
		if e.err != nil {
			t.Errorf("the event stream ended with %v, want a clean end", e.err)
		}
		if got := e.at.Sub(stopped); got < drain {
			t.Errorf("the event stream ended %v after the stop signal, before the drain delay %v", got, drain)
		}
		if !strings.Contains(e.body, "\nretry: ") || !strings.Contains(e.body, ": node shutting down; reconnect\n") {
			t.Errorf("the event stream's end carries no reconnect hint:\n%s", e.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream did not end after the drain")
	}

	// The transfer that was mid-DATA all along completes: 250.
	if _, err := io.WriteString(data, msg[len(msg)/2:]); err != nil {
		t.Fatalf("the rest of the DATA: %v", err)
	}
	if err := data.Close(); err != nil {
		t.Errorf("the message mid-DATA during the drain: %v, want 250", err)
	}
	// The session between transactions is told 421 (its next command's
	// read ends at once) and closed.
	code, text, err := between.Text.ReadResponse(421)
	var te *textproto.Error
	if err != nil && !errors.As(err, &te) || code != 421 {
		t.Errorf("an open session after the listeners closed: %d %q %v, want 421", code, text, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the drain")
	}
}

// dialSMTP opens an SMTP session (greeting and EHLO) on addr.
func dialSMTP(t *testing.T, addr string) *smtp.Client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // no read hangs the test
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	return c
}

// transaction sends one message on an open session.
func transaction(c *smtp.Client, to, msg string) error {
	if err := c.Mail("b@example.org"); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	return w.Close()
}

// status GETs url on a new connection and returns the status and body.
func status(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitRefused waits until addr refuses connections and returns when it
// first did.
func waitRefused(t *testing.T, addr string, within time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return time.Now()
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections %v on", addr, within)
		}
	}
}

func TestLoadConfigDrainDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"", 5 * time.Second, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"750ms", 750 * time.Millisecond, ""},
		{"-1s", 0, "MAYFLY_DRAIN_DELAY: must be 0 or a positive duration"},
		{"5", 0, "MAYFLY_DRAIN_DELAY: must be 0 or a positive duration"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			c, ok := configCase(t, map[string]string{"MAYFLY_DRAIN_DELAY": tc.value}, tc.wantErr)
			if got := c.drainDelay; ok && got != tc.want {
				t.Errorf("drainDelay = %v, want %v", got, tc.want)
			}
		})
	}
}

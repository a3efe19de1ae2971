package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
	"github.com/mayfly/mayfly/clients/go/cli"
	"github.com/mayfly/mayfly/storage/storagetest"
)

// service runs `mayfly all` on :0 ports against the test cluster, as
// TestRunAll does, and returns its API base URL, its SMTP address and its
// key prefix; it stops with the test.
func service(t *testing.T) (api, smtpAddr, prefix string) {
	t.Helper()
	s := startStack(t, nil)
	return s.api, s.smtp, s.prefix
}

// stack is an in-process `mayfly all` that can be stopped and started again
// on the same ports (its Redis keys and inboxes stay).
type stack struct {
	t         *testing.T
	env       map[string]string
	api, smtp string
	prefix    string
	cancel    context.CancelFunc
	done      chan struct{}
}

// startStack starts `mayfly all` on :0 ports with its own key prefix,
// cookies without Secure, the domain mayfly.test and the settings in extra
// (which win). It stops with the test.
func startStack(t *testing.T, extra map[string]string) *stack {
	t.Helper()
	s := &stack{t: t, prefix: storagetest.Prefix(t)}
	s.env = testEnv(t, map[string]string{
		"MAYFLY_REDIS_PREFIX":  s.prefix,
		"MAYFLY_HTTP_ADDR":     "127.0.0.1:0",
		"MAYFLY_SMTP_ADDR":     "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":    "127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE": "false",
		"MAYFLY_DOMAINS":       "mayfly.test",
	})
	maps.Copy(s.env, extra)
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start runs the node; after the first start, on the ports it had.
func (s *stack) start() {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs, logw := io.Pipe()
	done := make(chan struct{})
	env := maps.Clone(s.env)
	go func() {
		defer close(done)
		if err := run(ctx, []string{"all"}, environ(env), io.Discard, logw); err != nil {
			logw.CloseWithError(err)
		}
		logw.Close()
	}()
	s.cancel, s.done = cancel, done
	addrs := listeningAddrs(s.t, logs, "http", "smtp", "admin")
	s.api, s.smtp = "http://"+addrs["http"]+"/v1", addrs["smtp"]
	// The next start listens where this one did.
	s.env["MAYFLY_HTTP_ADDR"], s.env["MAYFLY_SMTP_ADDR"], s.env["MAYFLY_ADMIN_ADDR"] = addrs["http"], addrs["smtp"], addrs["admin"]
}

// stop shuts the node down; its ports refuse connections until start.
func (s *stack) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
		s.cancel = nil
	}
}

// served is how many requests to route (as the node's metrics name it,
// e.g. "GET /events") the node has answered 200 since it started, by its
// /metrics. An event stream counts when it opens.
func (s *stack) served(route string) int {
	s.t.Helper()
	series := `mayfly_http_requests_total{route="` + route + `",status="200"} `
	for line := range strings.Lines(get(s.t, http.DefaultClient, "http://"+s.env["MAYFLY_ADMIN_ADDR"]+"/metrics")) {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				s.t.Fatalf("/metrics: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// awaitServed waits until the node has answered n requests to route with
// 200 since it started. A client lists the inbox before it opens its event
// stream (the wait's "now", what events counts as already there): a mail
// sent once its GET /events is served comes after that list, however slow
// the client was to start.
func (s *stack) awaitServed(route string, n int) {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := s.served(route)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d %s answered 200 after 20 s, want %d", got, route, n)
		}
	}
}

// send delivers messages over one SMTP connection, one transaction each.
func send(t *testing.T, addr, to string, subjects ...string) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range subjects {
		if err := c.Mail("shop@example.com"); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt(to); err != nil {
			t.Fatal(err)
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "From: Shop <shop@example.com>\r\nSubject: %s\r\nMessage-ID: <%d@example.com>\r\n\r\nBody of %s.\r\n", s, time.Now().UnixNano(), s)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c.Quit()
}

// TestClientAgainstService drives every call of the Go client against the
// real service: creation and selection, extension up to max_expires_at,
// the pager over more messages than a mailbox keeps, one message, deletion.
func TestClientAgainstService(t *testing.T) {
	t.Parallel()
	api, smtpAddr, _ := service(t)
	c, err := client.New(api)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, err := c.CreateInbox(ctx, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mb := in.Mailbox()
	if !strings.HasSuffix(mb.Address, "@mayfly.test") || mb.Kind != "temporary" ||
		mb.MaxExpiresAt.Sub(mb.ExpiresAt) != 57*time.Minute {
		t.Fatalf("created %+v, want a 3-minute inbox of 60", mb)
	}
	if cur, err := in.Current(ctx); err != nil || cur.ID != mb.ID {
		t.Fatalf("Current: %+v, %v", cur, err)
	}
	if again, err := in.Select(ctx); err != nil || again.ID != mb.ID {
		t.Fatalf("Select: %+v, %v", again, err)
	}
	// Extensions add up to max_expires_at and stop there.
	var exp time.Time
	for range 7 {
		m, err := in.Extend(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		exp = m.ExpiresAt
		if exp.After(mb.MaxExpiresAt) {
			t.Fatalf("Extend granted %v, past max_expires_at %v", exp, mb.MaxExpiresAt)
		}
	}
	if !exp.Equal(mb.MaxExpiresAt) {
		t.Fatalf("after 70 minutes asked: %v, want capped at %v", exp, mb.MaxExpiresAt)
	}

	// 105 messages: the mailbox keeps its newest 100, and the pager walks
	// them all in pages of 7, newest first, each once.
	var subjects []string
	for i := range 105 {
		subjects = append(subjects, fmt.Sprintf("m%03d", i))
	}
	send(t, smtpAddr, mb.Address, subjects...)
	var got []client.MessageSummary
	for m, err := range in.All(ctx, 7) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != 100 || got[0].Subject != "m104" || got[99].Subject != "m005" {
		t.Fatalf("pager gave %d messages (%v … %v), want m104 … m005", len(got), first(got), last(got))
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.ID] || m.Status != client.StatusReady {
			t.Fatalf("message %+v repeated or not ready", m)
		}
		seen[m.ID] = true
	}
	page, err := in.List(ctx, 100, 95)
	if err != nil || len(page.Items) != 5 || page.HasMore || page.Offset != 95 {
		t.Fatalf("List(100, 95): %d items, has_more %v, %v", len(page.Items), page.HasMore, err)
	}
	msg, err := in.Message(ctx, got[0].ID)
	if err != nil || msg.Subject != "m104" || !strings.Contains(msg.TextBody, "Body of m104.") {
		t.Fatalf("Message: %+v, %v", msg, err)
	}
	if err := in.DeleteMessage(ctx, got[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Message(ctx, got[0].ID); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("Message after DeleteMessage: %v, want ErrMessageNotFound", err)
	}
	// Another jar cannot read this inbox: its session is its own.
	other, err := c.CreateInbox(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Message(ctx, got[1].ID); !errors.Is(err, client.ErrMessageNotFound) {
		t.Fatalf("another inbox's message: %v, want ErrMessageNotFound", err)
	}
	if err := in.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Current(ctx); !errors.Is(err, client.ErrInboxGone) {
		t.Fatalf("Current after Delete: %v, want ErrInboxGone", err)
	}
	for _, err := range in.Events(ctx) {
		if !errors.Is(err, client.ErrInboxGone) {
			t.Fatalf("Events of a deleted inbox: %v, want ErrInboxGone", err)
		}
		break
	}
}

func first(ms []client.MessageSummary) string {
	if len(ms) == 0 {
		return "none"
	}
	return ms[0].Subject
}

func last(ms []client.MessageSummary) string {
	if len(ms) == 0 {
		return "none"
	}
	return ms[len(ms)-1].Subject
}

// TestClientWaitForMessage: a message that arrived before the call, one that
// arrives while it sets up, and one that arrives while it waits are each
// found, over real SMTP.
func TestClientWaitForMessage(t *testing.T) {
	t.Parallel()
	api, smtpAddr, _ := service(t)
	c, _ := client.New(api)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := c.CreateInbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := in.Mailbox().Address
	send(t, smtpAddr, addr, "Welcome", "Your code 111111")
	start := time.Now()
	msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`code \d{6}`)})
	if err != nil || msg.Subject != "Your code 111111" || msg.Status != client.StatusReady {
		t.Fatalf("before the call: %+v, %v", msg, err)
	}
	t.Logf("found a message already there in %v", time.Since(start))

	for _, delay := range []time.Duration{0, 1500 * time.Millisecond} {
		subject := fmt.Sprintf("Your code %06d", delay.Milliseconds())
		go func() {
			time.Sleep(delay)
			send(t, smtpAddr, addr, "noise", subject)
		}()
		start := time.Now()
		msg, err := in.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(regexp.QuoteMeta(subject))})
		if err != nil || msg.Subject != subject || !strings.Contains(msg.TextBody, "Body of "+subject) {
			t.Fatalf("sent %v after the call: %+v, %v", delay, msg, err)
		}
		t.Logf("sent %v after the call: found in %v", delay, time.Since(start))
	}
}

// TestClientInboxExpiry: an inbox that expires ends its event stream with
// ErrInboxGone. The inbox is made to expire in 2 s by moving its expiry in
// Redis (a real one would take a minute).
func TestClientInboxExpiry(t *testing.T) {
	t.Parallel()
	api, _, prefix := service(t)
	c, _ := client.New(api)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := c.CreateInbox(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rc := storagetest.Client(t)
	tag := strings.ToLower(strings.SplitN(in.Mailbox().Address, "@", 2)[0])
	at := time.Now().Add(2 * time.Second).UnixMilli()
	box := prefix + ":{" + tag + "}:box"
	if err := rc.Do(ctx, rc.B().Hset().Key(box).FieldValue().FieldValue("e", fmt.Sprint(at)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"box", "msgs", "bodies"} {
		if err := rc.Do(ctx, rc.B().Pexpireat().Key(prefix+":{"+tag+"}:"+k).MillisecondsTimestamp(at).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var end error
	for _, err := range in.Events(ctx) {
		if err != nil {
			end = err
			break
		}
	}
	if !errors.Is(end, client.ErrInboxGone) {
		t.Fatalf("Events ended with %v, want ErrInboxGone", end)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the stream of an inbox expiring in 2 s ended after %v", took)
	}
	if _, err := in.Current(ctx); !errors.Is(err, client.ErrInboxGone) || !errors.Is(err, client.ErrSessionInvalid) {
		t.Fatalf("Current after expiry: %v, want ErrInboxGone (from ErrSessionInvalid)", err)
	}
}

// TestCLI runs `mayfly inbox` against the real service: docs/cli.md's
// example, every command, the jar's mode and the exit codes.
func TestCLI(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	api, smtpAddr := s.api, s.smtp
	state := t.TempDir()
	env := map[string]string{"MAYFLY_URL": api, "XDG_STATE_HOME": state}
	var mu sync.Mutex
	var printed bytes.Buffer // everything the tool printed, to look for secrets
	mayfly := func(args ...string) (string, int) {
		t.Helper()
		var out, errw bytes.Buffer
		code := cli.Main("mayfly inbox", args, func(k string) string { return env[k] }, &out, &errw)
		mu.Lock()
		printed.Write(out.Bytes())
		printed.Write(errw.Bytes())
		mu.Unlock()
		return strings.TrimSpace(out.String()), code
	}
	addr, code := mayfly("new")
	if code != cli.ExitOK || !strings.HasSuffix(addr, "@mayfly.test") {
		t.Fatalf("new: %q, exit %d", addr, code)
	}
	jar := filepath.Join(state, "mayfly", "jar.json")
	fi, err := os.Stat(jar)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("jar %s: %v, mode %v; want 0600", jar, err, fi)
	}
	send(t, smtpAddr, addr, "Welcome")
	go func() {
		time.Sleep(500 * time.Millisecond)
		send(t, smtpAddr, addr, "Your code 424242")
	}()
	out, code := mayfly("wait", "--subject", "Your code", "--timeout", "20s")
	if code != cli.ExitOK || !strings.Contains(out, "Subject: Your code 424242") || !strings.Contains(out, "Body of Your code 424242.") {
		t.Fatalf("wait: exit %d:\n%s", code, out)
	}
	if _, code := mayfly("wait", "--subject", "never", "--timeout", "1s"); code != cli.ExitTimeout {
		t.Fatalf("wait for nothing: exit %d, want %d", code, cli.ExitTimeout)
	}
	out, code = mayfly("list")
	lines := strings.Split(out, "\n")
	if code != cli.ExitOK || len(lines) != 2 || !strings.Contains(lines[0], "Your code 424242") {
		t.Fatalf("list: exit %d:\n%s", code, out)
	}
	id := strings.Fields(lines[1])[0]
	if out, code = mayfly("read", id, "--html"); code != cli.ExitOK || !strings.Contains(out, "Subject: Welcome") {
		t.Fatalf("read --html: exit %d:\n%s", code, out)
	}
	if out, code = mayfly("extend", "--minutes", "5"); code != cli.ExitOK || !strings.HasPrefix(out, "20") {
		t.Fatalf("extend: exit %d: %s", code, out)
	}
	events := make(chan string, 1)
	opened := s.served("GET /events")
	go func() {
		out, code := mayfly("events")
		events <- fmt.Sprintf("%d %s", code, out)
	}()
	s.awaitServed("GET /events", opened+1) // events has listed the inbox: the next mail is new to it
	send(t, smtpAddr, addr, "streamed")
	time.Sleep(500 * time.Millisecond)
	if _, code := mayfly("delete"); code != cli.ExitOK {
		t.Fatalf("delete: exit %d", code)
	}
	select {
	case got := <-events:
		if !strings.HasPrefix(got, fmt.Sprint(cli.ExitGone)) || !strings.Contains(got, `"subject":"streamed"`) {
			t.Fatalf("events: %s", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("events did not end after the inbox was deleted")
	}
	// After delete, a command on that name says it was deleted, not that
	// there is no such inbox.
	var errw bytes.Buffer
	if code := cli.Main("mayfly inbox", []string{"wait", "--timeout", "1s"}, func(k string) string { return env[k] }, io.Discard, &errw); code != cli.ExitGone ||
		!strings.Contains(errw.String(), "was deleted") || !strings.Contains(errw.String(), addr) {
		t.Errorf("wait after delete: exit %d, %q; want %d saying the inbox %s was deleted", code, errw.String(), cli.ExitGone, addr)
	}
	if _, code := mayfly("list"); code != cli.ExitGone {
		t.Errorf("list without an inbox: exit %d, want %d", code, cli.ExitGone)
	}
	// delete is idempotent, like the clients' Delete: exit 0, saying so.
	errw.Reset()
	if code := cli.Main("mayfly inbox", []string{"delete"}, func(k string) string { return env[k] }, io.Discard, &errw); code != cli.ExitOK ||
		!strings.Contains(errw.String(), "already deleted") {
		t.Errorf("delete after delete: exit %d, %q; want 0 saying it was already deleted", code, errw.String())
	}
	// Nothing listens: exit 5, unreachable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()
	if _, code := mayfly("--base", closed, "--name", "elsewhere", "new"); code != cli.ExitUnreachable {
		t.Errorf("new against %s (nothing listens): exit %d, want %d", closed, code, cli.ExitUnreachable)
	}
	if _, code := mayfly("frobnicate"); code != cli.ExitUsage {
		t.Errorf("unknown command: exit %d, want %d", code, cli.ExitUsage)
	}
	// No cookie value ever reached the output: they are base64url secrets
	// of 43 characters after the tag and a dot.
	mu.Lock()
	defer mu.Unlock()
	if m := regexp.MustCompile(`[a-z0-9]{20}\.[A-Za-z0-9_-]{43}`).Find(printed.Bytes()); m != nil {
		t.Errorf("the tool printed a cookie value: %s", m)
	}
}

// TestCLITestFlows runs the tool as a test suite's shell script would: a
// second `new` never orphans the first inbox, named inboxes, a resent code
// read with the same `wait` twice, errors with their details and one
// prefix, flags of one command refused by another, `events` and `wait` on
// one inbox at once.
func TestCLITestFlows(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"MAYFLY_RATE_CREATE_PER_MINUTE": "100", "MAYFLY_RATE_ACTIVE_PER_IP": "50"})
	state := t.TempDir()
	env := map[string]string{"MAYFLY_URL": s.api, "XDG_STATE_HOME": state}
	type res struct {
		out, err string
		code     int
	}
	mayfly := func(args ...string) res {
		var out, errw bytes.Buffer
		code := cli.Main("mayfly inbox", args, func(k string) string { return env[k] }, &out, &errw)
		return res{strings.TrimSpace(out.String()), errw.String(), code}
	}
	jar := filepath.Join(state, "mayfly", "jar.json")
	readState := func(name string) client.State {
		t.Helper()
		raw, err := os.ReadFile(jar)
		if err != nil {
			t.Fatal(err)
		}
		var j struct{ Inboxes map[string]client.State }
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		return j.Inboxes[name]
	}

	first := mayfly("new")
	if first.code != cli.ExitOK {
		t.Fatalf("new: %+v", first)
	}
	firstState := readState("default")
	// A second `new` refuses: the live inbox stays in the jar.
	if r := mayfly("new"); r.code != cli.ExitError || !strings.Contains(r.err, first.out) || !strings.Contains(r.err, "--replace") {
		t.Fatalf("second new: %+v; want a refusal naming the live inbox and --replace", r)
	}
	if got := readState("default").Mailbox.Address; got != first.out {
		t.Fatalf("the jar's inbox after a refused new: %s, want %s", got, first.out)
	}
	// Named inboxes live side by side.
	other := mayfly("--name", "other", "new")
	if other.code != cli.ExitOK {
		t.Fatalf("--name other new: %+v", other)
	}
	if r := mayfly("list-inboxes"); r.code != cli.ExitOK || !strings.Contains(r.out, "default\t"+first.out) || !strings.Contains(r.out, "other\t"+other.out) {
		t.Fatalf("list-inboxes: %+v", r)
	}
	// --replace deletes the old inbox first.
	second := mayfly("new", "--replace")
	if second.code != cli.ExitOK || second.out == first.out {
		t.Fatalf("new --replace: %+v", second)
	}
	c, _ := client.New(s.api)
	old, _ := c.Restore(firstState)
	if _, err := old.Current(context.Background()); !errors.Is(err, client.ErrInboxGone) {
		t.Fatalf("the replaced inbox: %v, want it deleted (ErrInboxGone)", err)
	}
	addr := second.out

	if r := mayfly("list", "--json"); r.code != cli.ExitOK || r.out != "[]" {
		t.Fatalf("list --json on an empty inbox: %+v, want []", r)
	}
	r := mayfly("extend", "--minutes", "60")
	if r.code != cli.ExitError || !strings.Contains(r.err, "field=extension_minutes") || !strings.Contains(r.err, "maximum=10") ||
		strings.Contains(r.err, "mayfly: ") || strings.Count(r.err, "mayfly inbox:") != 1 {
		t.Fatalf("extend --minutes 60: %+v; want the details, one prefix", r)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, cli.ExitOK}, {[]string{"wait", "--help"}, cli.ExitOK}, {[]string{"version"}, cli.ExitOK},
		{[]string{"list", "--subject", "x"}, cli.ExitUsage}, {[]string{"new", "--minutes", "3"}, cli.ExitUsage},
		{[]string{"wait", "--since", "yesterday"}, cli.ExitUsage}, {[]string{"read"}, cli.ExitUsage},
	} {
		if r := mayfly(tc.args...); r.code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, r.code, tc.code, r.err)
		}
	}

	// The resend flow: the same wait twice gets the first code, then the
	// second; a third finds nothing new.
	sendMail(t, s.smtp, addr, codeMail(addr, "Your code", "111111"))
	if r := mayfly("wait", "--subject", "Your code", "--code", "--timeout", "20s"); r.code != cli.ExitOK || r.out != "111111" {
		t.Fatalf("first wait: %+v", r)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		sendMail(t, s.smtp, addr, codeMail(addr, "Your code", "222222"))
	}()
	if r := mayfly("wait", "--subject", "Your code", "--code", "--timeout", "20s"); r.code != cli.ExitOK || r.out != "222222" {
		t.Fatalf("second wait: %+v; want the resent code", r)
	}
	if r := mayfly("wait", "--subject", "Your code", "--timeout", "1s"); r.code != cli.ExitTimeout {
		t.Fatalf("third wait: %+v; want a timeout (nothing unseen)", r)
	}
	list := mayfly("list")
	lines := strings.Split(list.out, "\n")
	if len(lines) != 2 {
		t.Fatalf("list: %+v", list)
	}
	firstID := strings.Fields(lines[1])[0]
	if r := mayfly("wait", "--since", firstID, "--code"); r.code != cli.ExitOK || r.out != "222222" {
		t.Fatalf("wait --since <first id>: %+v", r)
	}

	// events and wait on the same inbox at once: the service keeps one
	// stream per inbox; the one replaced says so and polls, and both
	// print the message.
	events := make(chan res, 1)
	opened := s.served("GET /events")
	go func() { events <- mayfly("events") }()
	s.awaitServed("GET /events", opened+1) // events follows the stream, which the wait's replaces
	go func() {
		s.awaitServed("GET /events", opened+2) // after the wait's "now"
		sendMail(t, s.smtp, addr, codeMail(addr, "both", "333333"))
	}()
	start := time.Now()
	if r := mayfly("wait", "--since", "now", "--subject", "both", "--code", "--timeout", "20s"); r.code != cli.ExitOK || r.out != "333333" {
		t.Fatalf("wait beside events: %+v", r)
	}
	t.Logf("wait beside events returned in %v", time.Since(start).Round(time.Millisecond))
	time.Sleep(6 * time.Second) // events polls every 5 s meanwhile
	if r := mayfly("delete"); r.code != cli.ExitOK {
		t.Fatalf("delete: %+v", r)
	}
	select {
	case ev := <-events:
		if ev.code != cli.ExitGone || !strings.Contains(ev.out, `"subject":"both"`) || !strings.Contains(ev.err, "another client opened one on this inbox") {
			t.Fatalf("events beside wait: %+v; want the message, the note on the replaced stream, exit %d", ev, cli.ExitGone)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("events did not end after the inbox was deleted")
	}
	if r := mayfly("list-inboxes", "--json"); r.code != cli.ExitOK || !strings.Contains(r.out, `"name": "other"`) || strings.Contains(r.out, addr) {
		t.Fatalf("list-inboxes after delete: %+v", r)
	}
}

// TestVersionAndHelp: `mayfly version` prints the build's version and
// `mayfly --help` the usage, both without an error (exit 0).
func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, nil, &out, io.Discard); err != nil ||
		!strings.HasPrefix(out.String(), "mayfly ") || !strings.Contains(out.String(), "go1.") {
		t.Fatalf("mayfly version: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"--help"}, nil, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "version") {
		t.Fatalf("mayfly --help: %q, %v", out.String(), err)
	}
}

// TestCLIUnreachableAndEventsTimeout: `events --timeout` ends quietly (exit
// 0) when it runs out; a `wait` whose service stopped answering exits 5
// after about 10 s, naming the URL, instead of running out its timeout.
func TestCLIUnreachableAndEventsTimeout(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	env := map[string]string{"MAYFLY_URL": s.api, "XDG_STATE_HOME": t.TempDir()}
	mayfly := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := cli.Main("mayfly inbox", args, func(k string) string { return env[k] }, &out, &out)
		return out.String(), code
	}
	if out, code := mayfly("new"); code != cli.ExitOK {
		t.Fatalf("new: exit %d: %s", code, out)
	}
	start := time.Now()
	if out, code := mayfly("events", "--timeout", "1s"); code != cli.ExitOK || time.Since(start) > 5*time.Second {
		t.Fatalf("events --timeout 1s: exit %d after %v: %s", code, time.Since(start), out)
	}
	s.stop()
	start = time.Now()
	out, code := mayfly("wait", "--timeout", "30s")
	if took := time.Since(start); code != cli.ExitUnreachable || took < 9*time.Second || took > 15*time.Second ||
		!strings.Contains(out, s.api) {
		t.Fatalf("wait on a stopped service: exit %d after %v: %s; want %d after about 10 s, naming %s",
			code, took, out, cli.ExitUnreachable, s.api)
	}
}

// sendMail delivers one raw message; from a goroutine of its own too (it
// reports with Errorf).
func sendMail(t *testing.T, addr, to, raw string) {
	t.Helper()
	if err := smtp.SendMail(addr, nil, "shop@example.com", []string{to}, []byte(raw)); err != nil {
		t.Errorf("SendMail: %v", err)
	}
}

func codeMail(to, subject, code string) string {
	return "From: Shop <shop@example.com>\r\nTo: <" + to + ">\r\nSubject: " + subject + "\r\n" +
		"Message-ID: <" + fmt.Sprint(time.Now().UnixNano()) + "@example.com>\r\n\r\n" +
		"Welcome! Your verification code is " + code + ".\r\nIt expires in 10 minutes.\r\n"
}

// scenarioLimits is the stack of clients/SCENARIOS.md: the spec's request
// rate (8/s) and creation limits that allow a suite's inboxes.
var scenarioLimits = map[string]string{
	"MAYFLY_RATE_REQUESTS_PER_SECOND": "8",
	"MAYFLY_RATE_CREATE_PER_MINUTE":   "100",
	"MAYFLY_RATE_CREATE_PER_HOUR":     "1000",
	"MAYFLY_RATE_CREATE_PER_DAY":      "10000",
	"MAYFLY_RATE_ACTIVE_PER_IP":       "50",
}

// scenarioInbox starts a stack with the scenario limits and creates an
// inbox on it with a client of its own, under a context of the given
// timeout that ends with the test.
func scenarioInbox(t *testing.T, timeout time.Duration) (*stack, context.Context, *client.Inbox) {
	t.Helper()
	s := startStack(t, scenarioLimits)
	c, _ := client.New(s.api)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	in, err := c.CreateInbox(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx, in
}

package ingest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
)

const testDomain = "mayfly.test"

// smtpHarness is one SMTP server on a loopback port in front of a real Store
// and Limiter with a key prefix of the test's own.
type smtpHarness struct {
	store   *storage.Store
	limiter *ratelimit.Limiter
	srv     *ingest.Server
	addr    string
	logs    *syncBuffer
	reg     *prometheus.Registry
}

// newSMTPHarness serves cfg on 127.0.0.1:0 against the test cluster.
func newSMTPHarness(t testing.TB, cfg ingest.Config) *smtpHarness {
	t.Helper()
	return newSMTPHarnessAt(t, "127.0.0.1:0", cfg)
}

// newSMTPHarnessAt serves cfg on addr (e.g. "[::1]:0").
func newSMTPHarnessAt(t testing.TB, addr string, cfg ingest.Config) *smtpHarness {
	t.Helper()
	client := storagetest.Client(t)
	prefix := storagetest.Prefix(t)
	store := storage.New(client, storage.Config{KeyPrefix: prefix})
	limiter := ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix})
	return serveSMTPAt(t, addr, store, limiter, cfg)
}

// serveSMTP starts a server on store and limiter; it is shut down when the
// test ends.
func serveSMTP(t testing.TB, store *storage.Store, limiter *ratelimit.Limiter, cfg ingest.Config) *smtpHarness {
	t.Helper()
	return serveSMTPAt(t, "127.0.0.1:0", store, limiter, cfg)
}

func serveSMTPAt(t testing.TB, addr string, store *storage.Store, limiter *ratelimit.Limiter, cfg ingest.Config) *smtpHarness {
	t.Helper()
	return serveSMTPParser(t, addr, store, limiter, cfg, ingest.ParserConfig{})
}

// newSMTPHarnessParser is newSMTPHarness with a parser of pcfg.
func newSMTPHarnessParser(t testing.TB, cfg ingest.Config, pcfg ingest.ParserConfig) *smtpHarness {
	t.Helper()
	client := storagetest.Client(t)
	prefix := storagetest.Prefix(t)
	store := storage.New(client, storage.Config{KeyPrefix: prefix})
	limiter := ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix})
	return serveSMTPParser(t, "127.0.0.1:0", store, limiter, cfg, pcfg)
}

func serveSMTPParser(t testing.TB, addr string, store *storage.Store, limiter *ratelimit.Limiter, cfg ingest.Config, pcfg ingest.ParserConfig) *smtpHarness {
	t.Helper()
	if len(cfg.Domains) == 0 {
		cfg.Domains = []string{testDomain}
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv := ingest.New(store, limiter, ingest.NewParser(pcfg), cfg, log, ingest.NewMetrics(reg))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &smtpHarness{store: store, limiter: limiter, srv: srv, addr: ln.Addr().String(), logs: logs, reg: reg}
}

// metric returns the value of the series name whose labels include labels
// (name=value pairs); 0 when there is none.
func (h *smtpHarness) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// mailbox creates a live mailbox on the harness's store.
func (h *smtpHarness) mailbox(t testing.TB, lifetime time.Duration) (storage.Mailbox, storage.Credential) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, cred, err := h.store.Create(ctx, storage.NewTag(), testDomain, lifetime, "test-owner")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return m, cred
}

// destroy deletes a mailbox the way DELETE /mailboxes/current does.
func (h *smtpHarness) destroy(t testing.TB, m storage.Mailbox, scoped storage.Credential) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, sess, err := h.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	if _, err := h.store.Destroy(ctx, sess); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
}

// messages returns the mailbox's messages, newest first, with bodies.
func (h *smtpHarness) messages(t testing.TB, m storage.Mailbox, scoped storage.Credential) []storage.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, sess, err := h.store.Select(ctx, m.ID, scoped)
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	sums, _, err := h.store.Messages(ctx, sess, storage.Page{Limit: 100})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	out := make([]storage.Message, 0, len(sums))
	for _, s := range sums {
		msg, err := h.store.Message(ctx, sess, s.ID)
		if err != nil {
			t.Fatalf("Message %s: %v", s.ID, err)
		}
		out = append(out, msg)
	}
	return out
}

// roomInWindow makes sure at least need is left of the current fixed
// window of length span (a minute when span is 0, as ratelimit.Rule's
// default) on this node's clock, which the SMTP rules count in, waiting for
// the next window if not: a test that counts hits against a rule then
// cannot straddle two windows, whose counts are apart (the hit over the
// limit would be the first of a fresh window, and admitted).
func roomInWindow(t testing.TB, span, need time.Duration) {
	t.Helper()
	if span == 0 {
		span = time.Minute
	}
	if left := span - time.Duration(time.Now().UnixNano()%int64(span)); left < need {
		t.Logf("waiting %v for the next %v window", left.Round(time.Millisecond), span)
		time.Sleep(left + 5*time.Millisecond)
	}
}

// step is one exchange of a scripted conversation.
type step struct {
	do    func(t *testing.T) // runs before send, e.g. to delete a mailbox mid-transaction
	send  string             // written with CRLF appended; "" sends nothing (the greeting)
	want  string             // prefix of the reply's last line, e.g. "550 5.1.1"; wantClosed for EOF
	has   []string           // lines the (multi-line) reply must hold, e.g. EHLO keywords
	lacks []string           // lines it must not hold
	wait  time.Duration      // how long the reply may take; default 5 s
}

// wantClosed as a step's want expects the server to have closed the
// connection (EOF or reset) instead of replying.
const wantClosed = "<closed>"

// forbidden is text that would mean internal error text reached the wire.
var forbidden = []string{"redis", "rueidis", "ERR ", "context", "deadline", "dial ", "refused",
	"storage:", "ingest:", "ratelimit:", "EOF", "i/o timeout", "broken pipe", "NOSCRIPT", "CROSSSLOT", "MOVED"}

// converse runs script over a fresh connection to addr and returns the
// transcript of everything the server wrote.
func converse(t *testing.T, addr string, script []step) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	var transcript strings.Builder
	for i, s := range script {
		if s.do != nil {
			s.do(t)
		}
		if s.send != "" {
			if _, err := io.WriteString(c, s.send+"\r\n"); err != nil && s.want != wantClosed {
				t.Fatalf("step %d: write %q: %v", i, abbreviate(s.send), err)
			}
		}
		wait := s.wait
		if wait == 0 {
			wait = 5 * time.Second
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		lines, err := readReply(r)
		transcript.WriteString(strings.Join(lines, "\n") + "\n")
		if s.want == wantClosed {
			if !isClosed(err) {
				t.Fatalf("step %d (%q): got reply %q (err %v), want the connection closed", i, abbreviate(s.send), lines, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (%q): read reply: %v (got %q)\ntranscript:\n%s", i, abbreviate(s.send), err, lines, transcript.String())
		}
		if got := lines[len(lines)-1]; !strings.HasPrefix(got, s.want) {
			t.Fatalf("step %d (%q): reply %q, want %q\ntranscript:\n%s", i, abbreviate(s.send), got, s.want, transcript.String())
		}
		for _, h := range s.has {
			if !hasLine(lines, h) {
				t.Errorf("step %d (%q): reply %q lacks %q", i, abbreviate(s.send), lines, h)
			}
		}
		for _, h := range s.lacks {
			if hasLine(lines, h) {
				t.Errorf("step %d (%q): reply %q has %q", i, abbreviate(s.send), lines, h)
			}
		}
	}
	assertNoInternalText(t, transcript.String())
	return transcript.String()
}

// forbiddenRE matches each forbidden text as a word of its own (not inside
// a longer run of letters and digits), case-insensitively: a reply that
// echoes a random mailbox address such as 55k1rxeofn…@ must not match "EOF".
var forbiddenRE = func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(forbidden))
	for i, f := range forbidden {
		re := `(?i)(^|[^a-z0-9])` + regexp.QuoteMeta(f)
		if c := f[len(f)-1]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			re += `($|[^a-z0-9])`
		}
		out[i] = regexp.MustCompile(re)
	}
	return out
}()

// assertNoInternalText fails if a reply carries Redis or Go error text.
func assertNoInternalText(t testing.TB, transcript string) {
	t.Helper()
	for i, re := range forbiddenRE {
		if re.MatchString(transcript) {
			t.Errorf("transcript holds %q:\n%s", forbidden[i], transcript)
		}
	}
}

// readReply reads one reply, all of its lines.
func readReply(r *bufio.Reader) ([]string, error) {
	var lines []string
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if err != nil {
			if line != "" {
				lines = append(lines, line)
			}
			return lines, err
		}
		lines = append(lines, line)
		if len(line) < 4 || line[3] != '-' {
			return lines, nil
		}
	}
}

// hasLine reports whether a reply line's text (after "250-" or "250 ")
// equals want.
func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if len(l) > 4 && l[4:] == want {
			return true
		}
	}
	return false
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

func abbreviate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// rfc822 builds a small message ending with the DATA terminator line, ready
// to be a step's send.
func rfc822(to, subject, body string) string {
	return "From: Sender <sender@example.org>\r\nTo: <" + to + ">\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + uuid.NewString() + "@example.org>\r\n\r\n" + body + "\r\n."
}

// envelope is the usual start of a transaction to one recipient.
func envelope(to string) []step {
	return []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250"},
		{send: "MAIL FROM:<sender@example.org>", want: "250"},
		{send: "RCPT TO:<" + to + ">", want: "250"},
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestForbiddenTextIsWordBounded: an address that happens to spell a
// forbidden word inside it is not internal text; the word itself is.
func TestForbiddenTextIsWordBounded(t *testing.T) {
	matches := func(s string) bool {
		for _, re := range forbiddenRE {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	for _, s := range []string{"250 2.1.5 <55k1rxeofn7q@mayfly.test> OK", "250 2.0.0 queued as credistag", "554 5.5.0 deadlines"} {
		if matches(s) {
			t.Errorf("%q matched a forbidden text", s)
		}
	}
	for _, s := range []string{"451 4.3.0 unexpected EOF", "421 redis: down", "451 ERR wrong", "550 storage: gone", "451 context deadline exceeded", "451 read: i/o timeout"} {
		if !matches(s) {
			t.Errorf("%q matched no forbidden text", s)
		}
	}
}

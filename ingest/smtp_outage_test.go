package ingest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

// outageHarness serves SMTP over a Redis of the test's own, which the test
// may kill or stall; prefix names its keys.
func outageHarness(t *testing.T, prefix string, cfg ingest.Config) (*storagetest.Server, *smtpHarness) {
	t.Helper()
	redis := storagetest.StartServer(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	store := storage.New(client, storage.Config{KeyPrefix: prefix})
	limiter := ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix})
	return redis, serveSMTP(t, store, limiter, cfg)
}

// TestSMTPRedisUnavailable: with Redis gone, DATA and RCPT answer 451 4.3.0
// (the sender retries), nothing of Redis's or Go's error text reaches the
// wire, the rate limits admit (fail open), and the logs keep the detail.
func TestSMTPRedisUnavailable(t *testing.T) {
	t.Parallel()
	redis, h := outageHarness(t, "outage", ingest.Config{RedisTimeout: 500 * time.Millisecond})
	m, _ := h.mailbox(t, 10*time.Minute)

	converse(t, h.addr, append(envelope(m.Address),
		step{send: "DATA", want: "354", do: func(*testing.T) { redis.Kill() }},
		step{send: rfc822(m.Address, "lost?", "must be retried"), want: "451 4.3.0"},
		step{send: "MAIL FROM:<sender@example.org>", want: "250"}, // the transaction limit fails open
		step{send: "RCPT TO:<" + m.Address + ">", want: "451 4.3.0"},
		step{send: "RCPT TO:<" + strings.ToUpper(m.Address) + ">", want: "451 4.3.0"},
		step{send: "QUIT", want: "221"}))
	// The connection limit fails open too: a new client is greeted.
	converse(t, h.addr, []step{{want: "220"}, {send: "EHLO client.example.org", want: "250"}})

	if got := h.metric(t, "mayfly_smtp_messages_total", "result", "unavailable"); got != 1 {
		t.Errorf("messages{result=unavailable} = %v, want 1", got)
	}
	if got := h.metric(t, "mayfly_smtp_redis_errors_total"); got < 4 {
		t.Errorf("redis errors = %v, want at least 4 (deliver, MAIL limit, 2 RCPT, connection limit)", got)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "redis unavailable") || !strings.Contains(logs, "storage: redis unavailable") {
		t.Errorf("logs lack the error detail:\n%s", logs)
	}
}

// TestSMTPRedisTimeoutAtRCPT: a Redis that stalls past RedisTimeout at RCPT
// is unavailable (451 4.3.0, retry later), not a session timeout (421 4.4.2,
// which closes the connection): the deadline is Redis's, not the client's.
func TestSMTPRedisTimeoutAtRCPT(t *testing.T) {
	t.Parallel()
	redis, h := outageHarness(t, "stall", ingest.Config{RedisTimeout: 300 * time.Millisecond})
	m, _ := h.mailbox(t, 10*time.Minute)
	converse(t, h.addr, []step{
		{want: "220"},
		{send: "EHLO client.example.org", want: "250"},
		{send: "MAIL FROM:<sender@example.org>", want: "250", do: func(*testing.T) { redis.Stop() }},
		{send: "RCPT TO:<" + m.Address + ">", want: "451 4.3.0"},
		{send: "QUIT", want: "221"},
	})
}

// TestSMTPLimitsFailClosed: with LimitsFailClosed, a per-IP limit that
// cannot be checked refuses: the connection with 451 4.3.0.
func TestSMTPLimitsFailClosed(t *testing.T) {
	t.Parallel()
	redis, h := outageHarness(t, "closed", ingest.Config{RedisTimeout: 300 * time.Millisecond, LimitsFailClosed: true})
	converse(t, h.addr, []step{{want: "220"}, {send: "EHLO client.example.org", want: "250"}, {send: "QUIT", want: "221"}})
	redis.Kill()
	converse(t, h.addr, []step{{want: "451 4.3.0"}})
}

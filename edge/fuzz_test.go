package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/valyala/fasthttp/fasthttputil"
)

// FuzzRequest sends arbitrary requests (method, path and query, one header,
// body) through the whole handler chain of a real edge node over an
// in-memory connection, and checks the contract: no panic, and every answer
// is a 2xx of the API or the JSON error envelope with a stable code and the
// request id of its X-Request-ID header. `make test` runs it briefly.
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct{ method, target, hname, hvalue, body string }{
		{"GET", "/v1/domains", "Accept", "application/json", ""},
		{"POST", "/v1/mailboxes", "Content-Type", "application/json", `{"lifetime_minutes":5}`},
		{"POST", "/v1/mailboxes", "Content-Type", "multipart/form-data; boundary=x", `{"lifetime_minutes":"x","lifetime_minutes":1}`},
		{"GET", "/v1/messages?limit=100&offset=9223372036854775807", "Cookie", "service_session=x.y", ""},
		{"DELETE", "/v1/messages/00000000-0000-0000-0000-000000000000", "Cookie", "mayfly_00=a", ""},
		{"PATCH", "/v1/mailboxes/current", "Transfer-Encoding", "chunked", "0\r\n\r\n"},
		{"POST", "/v1/mailboxes/x/select", "X-Forwarded-For", "1.2.3.4, ::1", ""},
		{"GET", "/v1/events", "Last-Event-ID", "zzz", ""},
		{"OPTIONS", "/v1/../../etc/passwd", "Origin", "https://evil.example", ""},
		{"GET", "/%00%ff", "X", strings.Repeat("a", 100), ""},
	} {
		f.Add(seed.method, seed.target, seed.hname, seed.hvalue, []byte(seed.body))
	}
	client := storagetest.Client(f)
	prefix := storagetest.Prefix(f)
	srv := edge.New(storage.New(client, storage.Config{KeyPrefix: prefix}),
		ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix, RequestsPerSecond: 1 << 30,
			CreatePerMinute: 1 << 20, CreatePerHour: 1 << 20, CreatePerDay: 1 << 20, ActivePerClient: 1 << 20, GlobalCreatePerMinute: 1 << 30}),
		edge.Config{Domains: []string{"mayfly.test"}, CookieInsecure: true}, slog.New(slog.DiscardHandler), nil)
	ln := fasthttputil.NewInmemoryListener()
	go srv.Serve(ln)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})

	f.Fuzz(func(t *testing.T, method, target, hname, hvalue string, body []byte) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: mayfly.test\r\n" + hname + ": " + hvalue +
			"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + string(body)
		conn, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		go func() { _, _ = io.WriteString(conn, raw) }()
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return // no HTTP answer to something that was not HTTP
		}
		defer res.Body.Close()
		if res.Header.Get("Content-Type") == "text/event-stream" {
			return // a stream opened (a 200 of the API): nothing more to read
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if res.StatusCode >= 200 && res.StatusCode < 300 {
			return
		}
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(b, &env); err != nil || env.Error.Code == "" {
			t.Fatalf("%q: %d %q is not the error envelope", raw, res.StatusCode, b)
		}
		if env.RequestID == "" || env.RequestID != res.Header.Get("X-Request-ID") {
			t.Fatalf("%q: request_id %q, X-Request-ID %q", raw, env.RequestID, res.Header.Get("X-Request-ID"))
		}
	})
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// TestRunAll runs `mayfly all` on :0 ports against the test cluster, as
// `make run` does, and follows a message from SMTP to the REST API: create a
// mailbox over HTTP, send to its address over SMTP, read it over HTTP.
func TestRunAll(t *testing.T) {
	t.Parallel()
	runAllFlow(t, testEnv(t, map[string]string{"MAYFLY_REDIS_PREFIX": storagetest.Prefix(t)}))
}

// testEnv is env plus the settings that reach the test Redis
// (storagetest.Env: its addresses and, if it needs them, password and TLS),
// and no drain delay unless env sets one: no load balancer watches a test's
// node, and its stop would wait MAYFLY_DRAIN_DELAY for nothing (the drain's
// own tests set it).
func testEnv(t testing.TB, env map[string]string) map[string]string {
	t.Helper()
	out := storagetest.Env(t)
	out["MAYFLY_DRAIN_DELAY"] = "0s"
	maps.Copy(out, env)
	return out
}

// environ is env in os.Environ's form (KEY=VALUE), which run reads.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runAllFlow runs `mayfly all` on :0 ports with env (which names the Redis)
// and follows a message from SMTP to the REST API: create a mailbox over
// HTTP with a cookie jar, open its event stream, send to its address over
// SMTP, get the event, read the message over HTTP, check /readyz and
// /metrics, and stop the node. It returns everything the node logged.
func runAllFlow(t *testing.T, env map[string]string) string {
	t.Helper()
	env = maps.Clone(env)
	maps.Copy(env, map[string]string{
		"MAYFLY_HTTP_ADDR":     "127.0.0.1:0",
		"MAYFLY_SMTP_ADDR":     "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":    "127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE": "false",
		"MAYFLY_SMTP_HOSTNAME": "mx.mayfly.test",
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	var logged bytes.Buffer // slog serialises its writes; read after run returns
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"all"}, environ(env), io.Discard, io.MultiWriter(logw, &logged))
		logw.Close()
	}()
	addrs := listeningAddrs(t, logs, "http", "smtp", "admin")

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	api := "http://" + addrs["http"] + "/v1"

	var created struct {
		Data struct {
			Mailbox struct{ ID, Address string }
		}
	}
	call(t, client, "POST", api+"/mailboxes", "{}", http.StatusCreated, &created)
	mb := created.Data.Mailbox
	call(t, client, "POST", api+"/mailboxes/"+mb.ID+"/select", "", http.StatusOK, nil)

	// The event stream is open before the mail arrives.
	events, err := client.Get(api + "/events")
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %v %v", err, events)
	}
	defer events.Body.Close()
	eventData := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(events.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				eventData <- d
				return
			}
		}
	}()

	msg := "From: Mayfly Test <sender@example.org>\r\nTo: <" + mb.Address + ">\r\n" +
		"Subject: code 424242\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		"<p>Your code is <b>424242</b></p><img src=\"https://tracker.example/p.gif\">\r\n"
	if err := smtp.SendMail(addrs["smtp"], nil, "sender@example.org", []string{mb.Address}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	select {
	case d := <-eventData:
		var ev struct{ ID, From, Subject, Status string }
		if err := json.Unmarshal([]byte(d), &ev); err != nil || ev.Subject != "code 424242" || ev.From != "Mayfly Test <sender@example.org>" || ev.Status != "ready" {
			t.Errorf("message.received data = %s (%v)", d, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message.received event within 5 s of the SMTP 250")
	}

	var list struct {
		Data struct {
			Items []struct{ ID, From, Subject, Status string }
		}
	}
	call(t, client, "GET", api+"/messages", "", http.StatusOK, &list)
	if len(list.Data.Items) != 1 {
		t.Fatalf("GET /messages: %d items, want 1", len(list.Data.Items))
	}
	item := list.Data.Items[0]
	if got, want := item.From, "Mayfly Test <sender@example.org>"; got != want {
		t.Errorf("from = %q, want %q", got, want)
	}
	if got, want := item.Subject, "code 424242"; got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
	var one struct {
		Data struct {
			Message struct {
				Status   string
				TextBody string `json:"text_body"`
				HTMLBody string `json:"html_body"`
			}
		}
	}
	call(t, client, "GET", api+"/messages/"+item.ID, "", http.StatusOK, &one)
	m := one.Data.Message
	if got, want := m.Status, "ready"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
	if !strings.Contains(m.TextBody, "424242") {
		t.Errorf("text_body = %q, want the code (derived from the HTML)", m.TextBody)
	}
	if !strings.Contains(m.HTMLBody, "<b>424242</b>") || strings.Contains(m.HTMLBody, "tracker.example") {
		t.Errorf("html_body = %q, want the markup kept and the remote image removed", m.HTMLBody)
	}

	call(t, client, "GET", "http://"+addrs["admin"]+"/readyz", "", http.StatusOK, nil)
	metrics := get(t, client, "http://"+addrs["admin"]+"/metrics")
	for _, series := range []string{"mayfly_smtp_sessions_open", `mayfly_smtp_messages_total{result="accepted"} 1`, "mayfly_http_requests_total"} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}
	checkScrapeRegistered(t, metrics)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	return logged.String()
}

// listeningAddrs reads run's JSON log until every kind has logged its
// "listening" line and returns the addresses; the rest of the log is
// drained in the background.
func listeningAddrs(t testing.TB, logs io.Reader, kinds ...string) map[string]string {
	t.Helper()
	found := make(chan map[string]string, 1)
	go func() {
		addrs := map[string]string{}
		sc := bufio.NewScanner(logs)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			var line struct{ Msg, Kind, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addrs[line.Kind] = line.Addr
			}
			all := true
			for _, k := range kinds {
				all = all && addrs[k] != ""
			}
			if !sent && all {
				found <- maps.Clone(addrs)
				sent = true
			}
		}
		if !sent {
			found <- addrs
		}
	}()
	select {
	case addrs := <-found:
		for _, k := range kinds {
			if addrs[k] == "" {
				t.Fatalf("run logged no %q listener (got %v)", k, addrs)
			}
		}
		return addrs
	case <-time.After(15 * time.Second):
		t.Fatal("run did not log its listeners in 15 s")
		return nil
	}
}

// call sends a request and decodes the JSON answer into out (if not nil).
func call(t *testing.T, c *http.Client, method, url, body string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, raw, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(raw)
}

// TestLoadConfigSMTP covers the ingest settings' parsing and their errors.
func TestLoadConfigSMTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" for success
		check   func(t *testing.T, c config)
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			got := fmt.Sprintf("%d %d %d %d %d %d %d %v %v %v %v", c.smtp.maxBytes, c.smtp.maxRecipients,
				c.smtp.maxLineBytes, c.smtp.maxSessions, c.smtp.sessionsPerIP, c.smtp.connPerMinute,
				c.smtp.mailPerMinute, c.smtp.readTimeout, c.smtp.dataTimeout, c.smtp.sessionTimeout, c.smtp.remoteImages)
			if want := "10485760 50 262144 1000 20 60 120 1m0s 5m0s 15m0s false"; got != want {
				t.Errorf("smtp defaults = %s, want %s", got, want)
			}
		}},
		{name: "shares and floors", check: func(t *testing.T, c config) {
			ic := smtpServerConfig(c, nil)
			got := fmt.Sprintf("%d %d %v %d %d %v", ic.MaxSessionsPerNet, c.connsPerNet, ic.IdleSessionTimeout,
				ic.MaxBufferBytesPerIP, ic.MinDataRate, ic.DataRateWindow)
			if want := "100 1024 2m0s 33554432 1024 30s"; got != want {
				t.Errorf("defaults = %s, want %s", got, want)
			}
		}},
		{name: "no rate floor", env: map[string]string{"MAYFLY_SMTP_MIN_DATA_RATE": "0"},
			check: func(t *testing.T, c config) {
				if got := smtpServerConfig(c, nil).MinDataRate; got >= 0 {
					t.Errorf("MinDataRate = %d for 0, want negative (no floor; ingest's 0 means its default)", got)
				}
			}},
		{name: "remote images allowed", env: map[string]string{"MAYFLY_HTML_REMOTE_IMAGES": "ALLOW"},
			check: func(t *testing.T, c config) {
				if !c.smtp.remoteImages {
					t.Error("remoteImages = false, want true")
				}
			}},
		{name: "remote images: unknown value", env: map[string]string{"MAYFLY_HTML_REMOTE_IMAGES": "yes"},
			wantErr: "MAYFLY_HTML_REMOTE_IMAGES: must be one of block, allow"},
		{name: "relays", env: map[string]string{"MAYFLY_SMTP_RELAYS": "192.0.2.0/24, 2001:db8::/32", "MAYFLY_SMTP_RELAY_CONN_PER_MINUTE": "500"},
			check: func(t *testing.T, c config) {
				ic := smtpServerConfig(c, nil)
				got := fmt.Sprintf("%v %s/%d/%v %s/%d/%v", ic.Relays, ic.RelayConnRule.Name, ic.RelayConnRule.Limit, ic.RelayConnRule.Window,
					ic.RelayMailRule.Name, ic.RelayMailRule.Limit, ic.RelayMailRule.Window)
				if want := "[192.0.2.0/24 2001:db8::/32] smtp-relay-conn/500/1m0s smtp-relay-mail/2000/1m0s"; got != want {
					t.Errorf("relays = %s, want %s", got, want)
				}
			}},
		{name: "relays: not a CIDR", env: map[string]string{"MAYFLY_SMTP_RELAYS": "relay.example.org"},
			wantErr: "MAYFLY_SMTP_RELAYS"},
		{name: "certificate without key", env: map[string]string{"MAYFLY_SMTP_TLS_CERT": "/tmp/cert.pem"},
			wantErr: "must be set together"},
		{name: "require TLS without a certificate", env: map[string]string{"MAYFLY_SMTP_REQUIRE_TLS": "true"},
			wantErr: "MAYFLY_SMTP_REQUIRE_TLS: needs MAYFLY_SMTP_TLS_CERT"},
		{name: "require TLS", env: map[string]string{"MAYFLY_SMTP_REQUIRE_TLS": "true",
			"MAYFLY_SMTP_TLS_CERT": "/tmp/cert.pem", "MAYFLY_SMTP_TLS_KEY": "/tmp/key.pem"},
			check: func(t *testing.T, c config) {
				if ic := smtpServerConfig(c, nil); !ic.RequireTLS || c.smtp.tlsReload != 5*time.Second {
					t.Errorf("RequireTLS = %v, reload = %v, want true, 5s", ic.RequireTLS, c.smtp.tlsReload)
				}
			}},
		{name: "zero max bytes", env: map[string]string{"MAYFLY_SMTP_MAX_BYTES": "0"},
			wantErr: "MAYFLY_SMTP_MAX_BYTES: must be a positive integer"},
		{name: "negative parses", env: map[string]string{"MAYFLY_SMTP_MAX_PARSES": "-1"},
			wantErr: "MAYFLY_SMTP_MAX_PARSES: must be an integer of at least 0"},
		{name: "bad data timeout", env: map[string]string{"MAYFLY_SMTP_DATA_TIMEOUT": "soon"},
			wantErr: "MAYFLY_SMTP_DATA_TIMEOUT: must be a positive duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := configCase(t, tc.env, tc.wantErr)
			if !ok {
				return
			}
			tc.check(t, c)
		})
	}
}

// TestUsageNamesCommands: the usage text lists every command run accepts.
func TestUsageNamesCommands(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"edge", "ingest", "all"} {
		if !strings.Contains(usage, "\n  "+cmd+" ") {
			t.Errorf("usage lacks %q", cmd)
		}
	}
	var out strings.Builder
	if err := run(context.Background(), []string{"bogus"}, nil, io.Discard, &out); err == nil {
		t.Error("run(bogus) succeeded")
	}
}

// configCase loads the configuration of env. With wantErr set it checks that
// loading fails with an error containing it and returns false; otherwise it
// fails the test on any error.
func configCase(t *testing.T, env map[string]string, wantErr string) (config, bool) {
	t.Helper()
	c, err := loadConfig(func(k string) string { return env[k] })
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("loadConfig error = %v, want one containing %q", err, wantErr)
		}
		return config{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}

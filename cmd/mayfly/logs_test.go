package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// The SMTP log's lines about clients are capped per second like the access
// log's, the rest counted in mayfly_smtp_log_dropped_total, and both logs
// name a client as MAYFLY_LOG_CLIENT_IP says.
func TestSMTPLogRateAndClientIP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, wantIP string // wantIP "": no ip key
	}{
		{"truncated", "127.0.0.0/24"},
		{"off", ""},
		{"full", "127.0.0.1"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			const sent, perSecond = 12, 3
			lines, dropped := sendAndLog(t, map[string]string{
				"MAYFLY_SMTP_LOG_RATE": fmt.Sprint(perSecond), "MAYFLY_LOG_CLIENT_IP": tc.mode, "MAYFLY_ACCESS_LOG": "all",
				// "smtp message accepted" is a debug line.
				"MAYFLY_LOG_LEVEL": "debug",
			}, sent)
			accepted, requests := 0, 0
			bySecond := map[string]int{}
			for _, l := range lines {
				switch l["msg"] {
				case "smtp message accepted":
					accepted++
					bySecond[fmt.Sprint(l["time"])[:19]]++
				case "request":
					requests++
				default:
					continue
				}
				ip, has := l["ip"]
				if tc.wantIP == "" && has || tc.wantIP != "" && ip != tc.wantIP {
					t.Errorf("%s line ip = %v (present %v), want %q", l["msg"], ip, has, tc.wantIP)
				}
			}
			if accepted+dropped != sent || dropped == 0 {
				t.Errorf("%d accepted lines and %d dropped for %d messages at %d lines/s, want every one written or dropped, some dropped", accepted, dropped, sent, perSecond)
			}
			for sec, n := range bySecond {
				if n > perSecond {
					t.Errorf("%d lines in %s, want at most %d", n, sec, perSecond)
				}
			}
			if requests == 0 {
				t.Error("no access-log line")
			}
		})
	}
}

// sendAndLog runs `mayfly all` with extra, creates a mailbox and sends it n
// messages over one SMTP connection, and returns the node's log lines and
// mayfly_smtp_log_dropped_total.
func sendAndLog(t *testing.T, extra map[string]string, n int) ([]map[string]any, int) {
	t.Helper()
	env := testEnv(t, map[string]string{"MAYFLY_REDIS_PREFIX": storagetest.Prefix(t), "MAYFLY_COOKIE_SECURE": "false",
		"MAYFLY_HTTP_ADDR": "127.0.0.1:0", "MAYFLY_SMTP_ADDR": "127.0.0.1:0", "MAYFLY_ADMIN_ADDR": "127.0.0.1:0"})
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	var logged syncBuffer
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"all"}, environ(env), io.Discard, io.MultiWriter(logw, &logged))
		logw.CloseWithError(err)
		done <- err
	}()
	addrs := listeningAddrs(t, logs, "http", "smtp", "admin")

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	var created struct {
		Data struct{ Mailbox struct{ ID, Address string } }
	}
	call(t, client, "POST", "http://"+addrs["http"]+"/v1/mailboxes", "{}", http.StatusCreated, &created)
	to := created.Data.Mailbox.Address

	c, err := smtp.Dial(addrs["smtp"])
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Mail("sender@example.org"); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt(to); err != nil {
			t.Fatal(err)
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "Subject: %d\r\n\r\nbody %d\r\n", i, i)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c.Quit()

	resp, err := http.Get("http://" + addrs["admin"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dropped := -1
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "mayfly_smtp_log_dropped_total "); ok {
			fmt.Sscan(v, &dropped)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(logged.String(), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil {
			lines = append(lines, line)
		}
	}
	return lines, dropped
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// BenchmarkEventLatency measures, on one `mayfly all` against the test
// cluster, the time from the SMTP 250 of a message to its message.received
// event read by an SSE client, one message at a time over one SMTP
// connection. It reports p50 and p99.
//
//	make cluster-up
//	MAYFLY_TEST_REDIS_ADDRS=$(deploy/cluster.sh addrs) go test ./cmd/mayfly -run '^$' -bench EventLatency -benchtime 2000x
func BenchmarkEventLatency(b *testing.B) {
	env := testEnv(b, map[string]string{
		"MAYFLY_REDIS_PREFIX":         storagetest.Prefix(b),
		"MAYFLY_HTTP_ADDR":            "127.0.0.1:0",
		"MAYFLY_SMTP_ADDR":            "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":           "127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE":        "false",
		"MAYFLY_SMTP_MAIL_PER_MINUTE": "1000000",
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	go func() {
		run(ctx, []string{"all"}, environ(env), io.Discard, logw)
		logw.Close()
	}()
	addrs := listeningAddrs(b, logs, "http", "smtp")
	api := "http://" + addrs["http"] + "/v1"
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	address := openMailbox(b, client, api)

	arrivals := make(chan string, 16)
	resp, err := client.Get(api + "/events")
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET /events: %v %v", err, resp)
	}
	defer resp.Body.Close()
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var s struct{ Subject string }
				json.Unmarshal([]byte(data), &s)
				arrivals <- s.Subject
			}
		}
		close(arrivals)
	}()

	c, err := smtp.Dial(addrs["smtp"])
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("bench.example"); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		subject := "lat-" + strconv.Itoa(i)
		if err := c.Mail("bench@example.org"); err != nil {
			b.Fatal(err)
		}
		if err := c.Rcpt(address); err != nil {
			b.Fatal(err)
		}
		w, err := c.Data()
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(w, "From: bench@example.org\r\nSubject: %s\r\nContent-Type: text/plain\r\n\r\nyour code is %06d\r\n", subject, i)
		if err := w.Close(); err != nil { // returns on the 250
			b.Fatal(err)
		}
		accepted := time.Now()
		if got := <-arrivals; got != subject {
			b.Fatalf("event %q, want %q", got, subject)
		}
		lat = append(lat, max(0, time.Since(accepted)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkIdleStreamsRSS runs the real binary and measures its resident
// memory before and after opening 1,000 idle event streams; it reports the
// growth per stream.
//
//	MAYFLY_TEST_REDIS_ADDRS=$(deploy/cluster.sh addrs) go test ./cmd/mayfly -run '^$' -bench IdleStreamsRSS -benchtime 1x
func BenchmarkIdleStreamsRSS(b *testing.B) {
	const streams = 1000
	bin := filepath.Join(b.TempDir(), "mayfly")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "edge")
	cmd.Env = os.Environ()
	for k, v := range storagetest.Env(b) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env,
		"MAYFLY_REDIS_PREFIX="+storagetest.Prefix(b),
		"MAYFLY_HTTP_ADDR=127.0.0.1:0", "MAYFLY_ADMIN_ADDR=127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE=false",
		// One client IP opens everything: lift the per-IP limits, which are not measured here.
		"MAYFLY_RATE_REQUESTS_PER_SECOND=1000000", "MAYFLY_RATE_CREATE_PER_MINUTE=1000000",
		"MAYFLY_RATE_CREATE_PER_HOUR=1000000", "MAYFLY_RATE_CREATE_PER_DAY=1000000",
		"MAYFLY_RATE_ACTIVE_PER_IP=1000000", "MAYFLY_HTTP_CONNS_PER_IP=1000000", "MAYFLY_HTTP_CONNS_PER_NET=1000000")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addrs := listeningAddrs(b, stderr, "http")
	api := "http://" + addrs["http"] + "/v1"

	var jars []*http.Client
	for range streams {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, Transport: &http.Transport{}}
		openMailbox(b, c, api)
		jars = append(jars, c)
	}
	time.Sleep(time.Second)
	before := rssKiB(b, cmd.Process.Pid)
	b.ResetTimer()
	for _, c := range jars {
		resp, err := c.Get(api + "/events")
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET /events: %v %v", err, resp)
		}
		defer resp.Body.Close()
		bufio.NewReader(resp.Body).ReadString('\n') // the stream is open
	}
	time.Sleep(2 * time.Second)
	after := rssKiB(b, cmd.Process.Pid)
	b.StopTimer()
	b.ReportMetric(float64(before)/1024, "rss-before-MiB")
	b.ReportMetric(float64(after)/1024, "rss-after-MiB")
	b.ReportMetric(float64(after-before)/streams, "KiB/stream")
}

func openMailbox(b *testing.B, c *http.Client, api string) string {
	b.Helper()
	resp, err := c.Post(api+"/mailboxes", "application/json", strings.NewReader("{}"))
	if err != nil {
		b.Fatal(err)
	}
	var created struct {
		Data struct{ Mailbox struct{ ID, Address string } }
	}
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		b.Fatalf("create: %d", resp.StatusCode)
	}
	resp, err = c.Post(api+"/mailboxes/"+created.Data.Mailbox.ID+"/select", "", nil)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("select: %v %v", err, resp)
	}
	resp.Body.Close()
	return created.Data.Mailbox.Address
}

func rssKiB(b *testing.B, pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

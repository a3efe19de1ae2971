package scenarios_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stack is a `bin/mayfly all` process that can be stopped and started
// again on the same ports (its Redis keys and inboxes stay).
type stack struct {
	t         *testing.T
	env       map[string]string
	api, smtp string
	admin     string
	prefix    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs strings.Builder // what the node logged, shown when a test fails
}

// binary is the repository's bin/mayfly (deploy/test.sh builds it before
// the client module's tests; by hand: make build).
func binary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../../bin/mayfly")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the scenarios run %s: build it with `make build` (%v)", bin, err)
	}
	return bin
}

// redisEnv is the node's settings to reach the test Redis
// (MAYFLY_TEST_REDIS_ADDRS and, when it needs them, its credentials and CA).
func redisEnv(t *testing.T) map[string]string {
	t.Helper()
	addrs := os.Getenv("MAYFLY_TEST_REDIS_ADDRS")
	if addrs == "" {
		t.Fatal("MAYFLY_TEST_REDIS_ADDRS is not set: run the tests with `make test`, or start a cluster with " +
			"`make cluster-up` and set MAYFLY_TEST_REDIS_ADDRS=$(deploy/cluster.sh addrs)")
	}
	env := map[string]string{"MAYFLY_REDIS_ADDRS": addrs}
	if v := os.Getenv("MAYFLY_TEST_REDIS_USERNAME"); v != "" {
		env["MAYFLY_REDIS_USERNAME"] = v
	}
	if v := os.Getenv("MAYFLY_TEST_REDIS_PASSWORD"); v != "" {
		env["MAYFLY_REDIS_PASSWORD"] = v
	}
	if v := strings.TrimSpace(os.Getenv("MAYFLY_TEST_REDIS_TLS_CA_FILE")); v != "" {
		env["MAYFLY_REDIS_TLS"], env["MAYFLY_REDIS_TLS_CA_FILE"] = "true", v
	}
	return env
}

// startStack starts `bin/mayfly all` on :0 ports with its own key prefix,
// cookies without Secure, the domain mayfly.test and the settings in extra
// (which win). It stops with the test.
func startStack(t *testing.T, extra map[string]string) *stack {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	s := &stack{t: t, prefix: "goscen-" + hex.EncodeToString(b[:])}
	s.env = redisEnv(t)
	maps.Copy(s.env, map[string]string{
		"MAYFLY_REDIS_PREFIX":     s.prefix,
		"MAYFLY_HTTP_ADDR":        "127.0.0.1:0",
		"MAYFLY_SMTP_ADDR":        "127.0.0.1:0",
		"MAYFLY_ADMIN_ADDR":       "127.0.0.1:0",
		"MAYFLY_COOKIE_SECURE":    "false",
		"MAYFLY_DOMAINS":          "mayfly.test",
		"MAYFLY_DRAIN_DELAY":      "0s", // no load balancer to drain from
		"MAYFLY_SHUTDOWN_TIMEOUT": "2s",
	})
	maps.Copy(s.env, extra)
	bin := binary(t)
	s.start(bin)
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("the node's log:\n%s", s.logs.String())
			s.mu.Unlock()
		}
	})
	return s
}

// start runs the node; after the first start, on the ports it had.
func (s *stack) start(bin ...string) {
	s.t.Helper()
	path := ""
	if len(bin) > 0 {
		path = bin[0]
	} else {
		path = binary(s.t)
	}
	cmd := exec.Command(path, "all")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAYFLY_") { // the stack's settings are the test's alone
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	found := make(chan map[string]string, 1)
	go func() {
		defer close(done)
		addrs := map[string]string{}
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			s.mu.Lock()
			s.logs.Write(sc.Bytes())
			s.logs.WriteByte('\n')
			s.mu.Unlock()
			var line struct{ Msg, Kind, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addrs[line.Kind] = line.Addr
			}
			if !sent && addrs["http"] != "" && addrs["smtp"] != "" && addrs["admin"] != "" {
				found <- maps.Clone(addrs)
				sent = true
			}
		}
		cmd.Wait()
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	var addrs map[string]string
	select {
	case addrs = <-found:
	case <-done:
		s.t.Fatalf("mayfly all exited before it listened:\n%s", s.logged())
	case <-time.After(20 * time.Second):
		s.stop()
		s.t.Fatalf("mayfly all did not listen in 20 s:\n%s", s.logged())
	}
	s.api, s.smtp, s.admin = "http://"+addrs["http"]+"/v1", addrs["smtp"], addrs["admin"]
	// The next start listens where this one did.
	s.env["MAYFLY_HTTP_ADDR"], s.env["MAYFLY_SMTP_ADDR"], s.env["MAYFLY_ADMIN_ADDR"] = addrs["http"], addrs["smtp"], addrs["admin"]
	s.awaitReady()
}

func (s *stack) logged() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// awaitReady waits for the node's /readyz.
func (s *stack) awaitReady() {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + s.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("mayfly all not ready in 20 s:\n%s", s.logged())
		}
	}
}

// stop shuts the node down (SIGTERM, as an orchestrator does); its ports
// refuse connections until start.
func (s *stack) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// served is how many requests to route (as the node's metrics name it,
// e.g. "GET /events") the node has answered 200 since it started, by its
// /metrics. An event stream counts when it opens.
func (s *stack) served(route string) int {
	s.t.Helper()
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	series := `mayfly_http_requests_total{route="` + route + `",status="200"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				s.t.Fatalf("/metrics: %q: %v", sc.Text(), err)
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

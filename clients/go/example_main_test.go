package client_test

// The examples (example_test.go) run against a real Mayfly: $MAYFLY_URL
// with $MAYFLY_SMTP_ADDR, or else a bin/mayfly of the repository started
// here on free loopback ports against the Redis Cluster of
// $MAYFLY_TEST_REDIS_ADDRS (make test). Without either the examples do not
// run (the other tests do), except under CI=true, where that fails.

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// smtpAddr is where the examples' stand-in for the system under test sends
// its mail.
var smtpAddr string

func init() { client.ExamplesMain = examplesMain }

// offlineRun is the tests and the examples that need no Mayfly; onlineRun
// the examples that do.
const (
	offlineRun = "^(Test|ExampleCode$|ExampleLinksWithText$)"
	onlineRun  = "^Example(_signupFlow|_resendCode|Inbox_.*)$"
)

// examplesMain starts the examples' Mayfly, if any (client.ExamplesMain,
// called by TestMain), and says how to run: the tests on the package's
// shifted calendar, then the examples that talk to Mayfly on the real one.
func examplesMain() (phases []client.TestPhase, stop func()) {
	flag.Parse()
	stop, err := exampleStack()
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples:", err)
		os.Exit(1)
	}
	online := stop != nil || os.Getenv("MAYFLY_URL") != ""
	if stop == nil {
		stop = func() {}
	}
	if !online && os.Getenv("CI") == "true" {
		fmt.Fprintln(os.Stderr, "examples: no Mayfly to run against: set MAYFLY_TEST_REDIS_ADDRS (make test) or MAYFLY_URL and MAYFLY_SMTP_ADDR")
		os.Exit(1)
	}
	if run := flag.Lookup("test.run").Value.String(); run != "" {
		// Chosen on the command line: one run, on the real calendar when
		// it names examples and a Mayfly is there.
		return []client.TestPhase{{RealClock: online && strings.Contains(run, "Example")}}, stop
	}
	if !online {
		fmt.Fprintln(os.Stderr, "examples: those that need a Mayfly do not run (set MAYFLY_TEST_REDIS_ADDRS, or MAYFLY_URL and MAYFLY_SMTP_ADDR)")
		return []client.TestPhase{{Run: offlineRun}}, stop
	}
	return []client.TestPhase{{Run: offlineRun}, {Run: onlineRun, RealClock: true}}, stop
}

// exampleStack starts bin/mayfly when MAYFLY_TEST_REDIS_ADDRS is set and
// MAYFLY_URL is not, and points MAYFLY_URL at it.
func exampleStack() (stop func(), err error) {
	smtpAddr = os.Getenv("MAYFLY_SMTP_ADDR")
	redis := os.Getenv("MAYFLY_TEST_REDIS_ADDRS")
	if os.Getenv("MAYFLY_URL") != "" || redis == "" {
		return nil, nil
	}
	repo, _ := filepath.Abs("../..")
	bin := filepath.Join(repo, "bin", "mayfly")
	built := false // a binary of our own, removed after
	if _, err := os.Stat(bin); err != nil {
		built = true
		bin = filepath.Join(os.TempDir(), fmt.Sprintf("mayfly-examples-%d", os.Getpid()))
		build := exec.Command("go", "build", "-o", bin, "./cmd/mayfly")
		build.Dir, build.Stderr = repo, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("building mayfly: %w", err)
		}
		defer func() {
			if err != nil {
				os.Remove(bin)
			}
		}()
	}
	// Three distinct free ports: each listener stays open until all are
	// picked (one closed before the next could be picked again).
	ports := make([]string, 3)
	held := make([]net.Listener, 0, len(ports))
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range held {
				l.Close()
			}
			return nil, err
		}
		held = append(held, l)
		ports[i] = l.Addr().String()
	}
	for _, l := range held {
		l.Close()
	}
	cmd := exec.Command(bin, "all")
	cmd.Env = append(os.Environ(),
		"MAYFLY_REDIS_ADDRS="+redis, fmt.Sprintf("MAYFLY_REDIS_PREFIX=goexamples-%d", time.Now().UnixNano()),
		"MAYFLY_HTTP_ADDR="+ports[0], "MAYFLY_SMTP_ADDR="+ports[1], "MAYFLY_ADMIN_ADDR="+ports[2],
		"MAYFLY_COOKIE_SECURE=false", "MAYFLY_DOMAINS=mayfly.test", "MAYFLY_LOG_LEVEL=warn",
		"MAYFLY_RATE_CREATE_PER_MINUTE=1000", "MAYFLY_RATE_ACTIVE_PER_IP=1000", "MAYFLY_SHUTDOWN_TIMEOUT=2s",
		// Examples that send mail while Events follows count on its first
		// list being answered at once, not after a request-rate 429.
		"MAYFLY_RATE_REQUESTS_PER_SECOND=1000",
		"MAYFLY_DRAIN_DELAY=0s") // no load balancer to drain from: stop at once
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if built {
			os.Remove(bin)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + ports[2] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", ports[1]); err == nil && resp.StatusCode == http.StatusOK {
				c.Close()
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("mayfly not ready in 20 s:\n%s", logs.String())
		}
	}
	os.Setenv("MAYFLY_URL", "http://"+ports[0]+"/v1")
	smtpAddr = ports[1]
	return stop, nil
}

// sendCode stands for the system under test: it mails a verification code
// to addr.
func sendCode(addr, subject, code string) error {
	return smtp.SendMail(smtpAddr, nil, "shop@example.com", []string{addr}, []byte(
		"From: Shop <shop@example.com>\r\nTo: <"+addr+">\r\nSubject: "+subject+"\r\n\r\n"+
			"Order #2026 placed 2026-11-24.\r\nYour verification code is "+code+".\r\n"))
}

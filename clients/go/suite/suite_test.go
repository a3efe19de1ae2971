//go:build suite

// Package suite is a test suite under a public service's limits (issue
// 37): 200 tests of a signup flow that use only the default fixture, a
// tagged address per test on the one inbox the test binary shares
// (clienttest.NewRecipient), so a run costs one inbox creation. It passes
// twice in a row from one IP against a stack with the service's own
// defaults (5 creations a minute, 10 an hour, 20 a day; 5 live inboxes; 8
// requests a second; 120 SMTP transactions and 60 connections a minute).
//
// The system under test is a tiny signup app this process starts (an HTTP
// server): POST /signup mails, over SMTP to $MAYFLY_SUITE_SMTP, a text+HTML
// mail with a 6-digit code and a "Verify your email" link. Each test signs
// up with its recipient's address, waits for the mail (scoped to it), reads
// the code (client.Code) and the link (client.LinksWithText), submits the
// code, follows the link and asserts the app says verified.
//
// Run it (behind the build tag suite, so `go test ./...` leaves it out):
//
//	cd clients/go && MAYFLY_URL=http://127.0.0.1:8080/v1 MAYFLY_SUITE_SMTP=127.0.0.1:2525 \
//	    go test -tags suite -count=1 -json ./suite
//
// MAYFLY_SUITE_TESTS sets the count (default 200); -parallel how many run
// at once (default here 16).
package suite

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
	"github.com/mayfly/mayfly/clients/go/clienttest"
)

var theApp *app

// logger shows the client's reconnects and fallbacks (info), if any.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

func TestMain(m *testing.M) {
	flag.Parse()
	if !flagSet("test.parallel") {
		flag.Set("test.parallel", "16")
	}
	smtpAddr := os.Getenv("MAYFLY_SUITE_SMTP")
	if smtpAddr == "" {
		fmt.Fprintln(os.Stderr, "suite: MAYFLY_SUITE_SMTP is not set: the SMTP host:port of the Mayfly under test (MAYFLY_URL is its API, with /v1)")
		os.Exit(2)
	}
	a, stop, err := startApp(smtpAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite: starting the signup app:", err)
		os.Exit(1)
	}
	theApp = a
	start := time.Now()
	code := m.Run()
	creations := 0
	if s := clienttest.Shared(clienttest.BaseURL()); s != nil {
		creations = s.Creations()
	}
	clienttest.Close()
	stop()
	fmt.Printf("suite: %d inbox creations, %v\n", creations, time.Since(start).Round(time.Millisecond))
	os.Exit(code)
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func tests(t *testing.T) int {
	v := os.Getenv("MAYFLY_SUITE_TESTS")
	if v == "" {
		return 200
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("MAYFLY_SUITE_TESTS=%q: want a count", v)
	}
	return n
}

func TestSignup(t *testing.T) {
	for i := range tests(t) {
		t.Run(fmt.Sprintf("signup-%03d", i), func(t *testing.T) {
			t.Parallel()
			signup(t)
		})
	}
}

// signup is one test: sign up with a tagged address, read the mail, use
// the code and the link.
func signup(t *testing.T) {
	r := clienttest.NewRecipient(t, client.WithLogger(logger))
	// The app's mail may wait for the next minute of the public SMTP
	// limits (120 mails a minute per IP): give the wait more than the
	// 20 s default, within the test's deadline.
	ctx, cancel := context.WithTimeout(clienttest.Context(t), 150*time.Second)
	defer cancel()
	post(t, "/signup", url.Values{"email": {r.Address()}})
	msg, err := r.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`^Confirm your signup$`)})
	if err != nil {
		t.Fatal(err)
	}
	if msg.To != r.Address() {
		t.Fatalf("the mail is to %q; want %q", msg.To, r.Address())
	}
	code, ok := client.Code(msg, nil)
	if !ok {
		t.Fatalf("no code in %q", msg.TextBody)
	}
	var verify string
	for _, l := range client.LinksWithText(msg) {
		if l.Text == "Verify your email" {
			verify = l.URL
		}
	}
	if verify == "" {
		t.Fatalf("no link labelled \"Verify your email\" in %+v", client.LinksWithText(msg))
	}
	post(t, "/verify-code", url.Values{"email": {r.Address()}, "code": {code}})
	if body := get(t, verify); !strings.Contains(body, "verified") {
		t.Fatalf("the link: %q", body)
	}
	if body := get(t, theApp.base+"/status?email="+url.QueryEscape(r.Address())); strings.TrimSpace(body) != "verified" {
		t.Fatalf("the app says %q; want verified", body)
	}
}

func post(t *testing.T, path string, form url.Values) {
	t.Helper()
	resp, err := http.PostForm(theApp.base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, body)
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	return string(body)
}

// Package suite200 is a realistic end-to-end suite against a running
// Mayfly (issue 27's yardstick): 200 tests in one process, each creating an
// inbox, receiving two mails over SMTP from this one IP (the system under
// test stands in: net/smtp to $MAYFLY_SMTP_ADDR), and waiting for the
// second ("resend code"). It runs only when asked, against `make run`:
//
//	make run                                      # in another terminal (dev profile)
//	cd clients/go && MAYFLY_SUITE=1 MAYFLY_URL=http://127.0.0.1:8080/v1 \
//	    MAYFLY_SMTP_ADDR=127.0.0.1:2525 go test -count=1 ./examples/suite200
//
// MAYFLY_SUITE_TESTS changes the count (default 200); -parallel how many run
// at once (go test's default: GOMAXPROCS).
package suite200

import (
	"fmt"
	"net/smtp"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
	"github.com/mayfly/mayfly/clients/go/clienttest"
)

func TestSignupSuite(t *testing.T) {
	if os.Getenv("MAYFLY_SUITE") == "" {
		t.Skip("an opt-in suite against a running Mayfly: MAYFLY_SUITE=1 MAYFLY_URL=… MAYFLY_SMTP_ADDR=… (see the package doc)")
	}
	smtpAddr := os.Getenv("MAYFLY_SMTP_ADDR")
	if smtpAddr == "" {
		t.Fatal("MAYFLY_SMTP_ADDR is not set: the SMTP address of the Mayfly under test (make run: 127.0.0.1:2525)")
	}
	n := 200
	if v := os.Getenv("MAYFLY_SUITE_TESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("MAYFLY_SUITE_TESTS=%q: want a count", v)
		}
	}
	start := time.Now()
	t.Cleanup(func() { t.Logf("%d tests in %v", n, time.Since(start).Round(time.Millisecond)) })
	for i := range n {
		t.Run(fmt.Sprintf("signup-%03d", i), func(t *testing.T) {
			t.Parallel()
			inbox := clienttest.NewInbox(t)
			ctx := clienttest.Context(t)
			addr := inbox.Mailbox().Address
			codeMail := client.Match{Subject: regexp.MustCompile(`^Your code$`)}
			for round, code := range []string{fmt.Sprintf("1%05d", i), fmt.Sprintf("2%05d", i)} {
				// The system under test (a signup, then a resend) mails the code.
				err := smtp.SendMail(smtpAddr, nil, "shop@example.com", []string{addr}, []byte(
					"From: Shop <shop@example.com>\r\nTo: <"+addr+">\r\nSubject: Your code\r\n\r\n"+
						"Your verification code is "+code+".\r\n"))
				if err != nil {
					t.Fatalf("mail %d: %v", round+1, err)
				}
				msg, err := inbox.WaitForMessage(ctx, codeMail)
				if err != nil {
					t.Fatalf("wait %d: %v", round+1, err)
				}
				if got, _ := client.Code(msg, nil); got != code {
					t.Fatalf("wait %d: code %q, want %q", round+1, got, code)
				}
			}
		})
	}
}

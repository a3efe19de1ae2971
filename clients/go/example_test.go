package client_test

import (
	"context"
	"fmt"
	"log"
	"regexp"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// The signup flow of an end-to-end test: a fresh inbox, the system under
// test mails its verification code there, the test reads it. signUp stands
// for the system under test.
func Example_signupFlow() {
	signUp := func(email string) error { return nil }

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New("http://127.0.0.1:8080/v1")
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := c.CreateInbox(ctx, 10*time.Minute)
	if err != nil {
		log.Fatal(err) // a creation limit carries its wait: errors.As(err, &apiErr); apiErr.RetryAfter
	}
	defer inbox.Delete(context.Background())

	if err := signUp(inbox.Mailbox().Address); err != nil {
		log.Fatal(err)
	}
	msg, err := inbox.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`(?i)verification code`)})
	if err != nil {
		log.Fatal(err) // client.ErrWaitTimeout: no such mail in 2 minutes
	}
	code, _ := client.Code(msg, nil)
	fmt.Println("code:", code)
}

// A "resend code" flow: the same wait, run again, returns the next matching
// message, never one this Inbox already returned (client.SinceUnseen, the
// default). resend stands for the system under test.
func Example_resendCode() {
	resend := func(email string) error { return nil }

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := client.New("http://127.0.0.1:8080/v1")
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Delete(context.Background())
	codeMail := client.Match{Subject: regexp.MustCompile(`Your code`)}
	first, err := inbox.WaitForMessage(ctx, codeMail)
	if err != nil {
		log.Fatal(err)
	}
	if err := resend(inbox.Mailbox().Address); err != nil {
		log.Fatal(err)
	}
	second, err := inbox.WaitForMessage(ctx, codeMail) // not first again
	if err != nil {
		log.Fatal(err)
	}
	c1, _ := client.Code(first, nil)
	c2, _ := client.Code(second, nil)
	fmt.Println(c1, "then", c2)
	// Or: client.Match{Subject: ..., Since: client.SinceMessage(first.ID)},
	// client.SinceTime(t) with t taken before the resend, client.SinceNow().
}

// Following an inbox's new messages until it expires.
func ExampleInbox_Events() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080/v1")
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range inbox.Events(ctx) {
		if err != nil {
			log.Print(err) // client.ErrInboxGone once it expired: create a new one
			break
		}
		fmt.Println(ev.Message.From, ev.Message.Subject)
	}
}

// Every message, page by page.
func ExampleInbox_All() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080/v1")
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	for m, err := range inbox.All(ctx, 50) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.ReceivedAt.Format(time.RFC3339), m.Subject)
	}
}

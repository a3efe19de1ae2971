package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// The signup flow of an end-to-end test: a fresh inbox, the system under
// test mails its verification code there, the test reads it. signUp stands
// for the system under test. (A wait whose context has no deadline ends
// after 20 s; in a test, hand it the test's context or deadline, or use
// package clienttest.)
func Example_signupFlow() {
	signUp := func(email string) error { return sendCode(email, "Your verification code", "482913") }

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("MAYFLY_URL")) // e.g. http://127.0.0.1:8080/v1
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
		log.Fatal(err) // client.ErrWaitTimeout, saying what did arrive
	}
	code, _ := client.Code(msg, nil)
	fmt.Println("code:", code)
	// Output: code: 482913
}

// A "resend code" flow: the same wait, run again, returns the next matching
// message, never one this Inbox already returned (client.SinceUnseen, the
// default). resend stands for the system under test.
func Example_resendCode() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("MAYFLY_URL"))
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Delete(context.Background())
	codeMail := client.Match{Subject: regexp.MustCompile(`Your code`)}
	if err := sendCode(inbox.Mailbox().Address, "Your code", "111111"); err != nil {
		log.Fatal(err)
	}
	first, err := inbox.WaitForMessage(ctx, codeMail)
	if err != nil {
		log.Fatal(err)
	}
	if err := sendCode(inbox.Mailbox().Address, "Your code", "222222"); err != nil { // resend
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

	// Output: 111111 then 222222
}

// Asserting that no second email comes: ExpectNoMessage waits out the
// window, and fails at once with the message if one arrives.
func ExampleInbox_ExpectNoMessage() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("MAYFLY_URL"))
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Delete(context.Background())
	err = inbox.ExpectNoMessage(ctx, client.Match{}, time.Second)
	fmt.Println("nothing within a second:", err == nil)
	sendCode(inbox.Mailbox().Address, "Your code", "333333")
	err = inbox.ExpectNoMessage(ctx, client.Match{}, 10*time.Second)
	var unexpected *client.UnexpectedMessageError
	if errors.As(err, &unexpected) {
		fmt.Println("unexpected:", unexpected.Received.Subject)
	}
	// Output:
	// nothing within a second: true
	// unexpected: Your code
}

// Following an inbox's new messages. Events ends with the wait-timeout
// error at ctx's deadline (20 s when ctx has none): give it the deadline
// you mean to follow for.
func ExampleInbox_Events() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("MAYFLY_URL"))
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Delete(context.Background())
	// Events yields what arrives once it follows: the messages already
	// there are the list's (inbox.All).
	time.AfterFunc(500*time.Millisecond, func() { sendCode(inbox.Mailbox().Address, "Welcome", "444444") })
	for ev, err := range inbox.Events(ctx) {
		if err != nil {
			log.Print(err) // client.ErrInboxGone once it expired: create a new one
			break
		}
		fmt.Println(ev.Message.From, "-", ev.Message.Subject)
		break // one is enough here
	}
	// Output: Shop <shop@example.com> - Welcome
}

// Every message, page by page, newest first.
func ExampleInbox_All() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(os.Getenv("MAYFLY_URL"))
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := c.CreateInbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Delete(context.Background())
	for _, s := range []string{"one", "two", "three"} {
		sendCode(inbox.Mailbox().Address, s, "555555")
	}
	if _, err := inbox.WaitForMessages(ctx, 3, client.Match{}); err != nil {
		log.Fatal(err)
	}
	for m, err := range inbox.All(ctx, 2) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Subject)
	}
	// Output:
	// three
	// two
	// one
}

// The code of a message: the digits next to a keyword such as "code", not
// the order number or the year before them.
func ExampleCode() {
	msg := client.Message{TextBody: "Order #2026 placed 2026-11-24.\nYour verification code is 482913."}
	code, ok := client.Code(msg, nil)
	fmt.Println(code, ok, client.Codes(msg))
	// Output: 482913 true [2026 2026 482913]
}

// The link labelled "Verify".
func ExampleLinksWithText() {
	msg := client.Message{HTMLBody: `<p><a href="https://shop.example/help">Help</a> <a href="https://shop.example/verify?u=1&amp;t=2">Verify</a></p>`}
	for _, l := range client.LinksWithText(msg) {
		if l.Text == "Verify" {
			fmt.Println(l.URL)
		}
	}
	// Output: https://shop.example/verify?u=1&t=2
}

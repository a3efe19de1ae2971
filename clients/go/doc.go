// Package client is the official Go client of Mayfly, the temporary
// receive-only inbox service, and of any service that follows the same API
// (spec.md, v1). It uses only the standard library.
//
// The common use is a test of a signup flow: create an inbox, have the
// system under test send mail to its address, wait for the message, read the
// code:
//
//	c, err := client.New(os.Getenv("MAYFLY_URL")) // e.g. https://mayfly.example/v1
//	if err != nil { ... }
//	inbox, err := c.CreateInbox(ctx, 10*time.Minute)
//	// ... sign up with inbox.Mailbox().Address ...
//	msg, err := inbox.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`Your code`)})
//	code, ok := client.Code(msg, nil)
//
// In a Go test, package clienttest gives each test a Recipient
// (clienttest.NewRecipient(t)): a tagged address of one inbox the test
// binary shares, so a suite on a public service's limits (5 creations a
// minute, 10 an hour, 20 a day per IP) costs one creation; or an inbox per
// test (clienttest.NewInbox(t)), deleted when the test ends. Waits are
// bounded by the test's deadline.
//
// # Tagged addresses and shared inboxes
//
// The service delivers mail for <local>+<tag>@<domain> into the inbox of
// <local>@<domain> and records the recipient on every message
// (MessageSummary.To). Inbox.AddressFor gives a tagged address,
// Inbox.Recipient a Recipient whose waits, ExpectNoMessage and Events see
// only its mail (Match.To and EventsTo do the same on the Inbox). A
// SharedInbox (NewSharedInbox) hands out recipients of one inbox it
// creates, extends and replaces as its lifetime asks; the recipients of
// one inbox wait side by side on one event stream.
//
// # Inboxes and cookies
//
// Access to an inbox is proven by cookies, and a cookie jar is a security
// boundary: every Inbox holds a jar of its own, never shared with another.
// The mailbox-scoped cookie's prefix is not part of the API, so the client
// finds that cookie by its name's suffix, "_" and the mailbox id without
// hyphens. The jar keeps cookies for the service's host only and sends
// Secure cookies over https only: against a service on plain http (a local
// test setup), the service must issue cookies without Secure (Mayfly:
// MAYFLY_COOKIE_SECURE=false). Inbox.State and Client.Restore carry an
// inbox's cookies between processes (the command-line tool keeps them in a
// file of mode 0600); cookie values are never logged.
//
// # Retries
//
// The client retries what is safe to retry (clients/SCENARIOS.md, shared by
// the official clients), and never past the caller's deadline: when the
// next wait would pass it, the last error is returned.
//
//   - a request-rate 429 (RATE_LIMITED, or any 429 that is not a creation
//     limit) and a 503 REQUEST_PROTECTION were refused before anything was
//     done: every call, creation included, waits Retry-After (a whole
//     number of seconds, 0 included; else 1 s) plus up to 250 ms of jitter
//     and tries again;
//   - a refused connection sent nothing: every call tries again after a
//     backoff (a random wait between zero and RetryPolicy.BaseDelay·2^n,
//     capped at MaxDelay: full jitter);
//   - a 500, any other 503, a reset or a timeout after sending: reads (GET)
//     and the event stream only, with the same backoff; never POST
//     /mailboxes (it may have created an inbox), never PATCH or DELETE;
//   - a creation limit (ErrCreationLimit: the per-IP windows, the active
//     cap, the global cap) is returned at once, with the wait the service
//     asked for in Error.RetryAfter, unless the creation asked to wait
//     (WaitForCapacity);
//   - a call makes at most RetryPolicy.MaxAttempts (6) attempts; a request
//     rate still refused then matches ErrRateLimited. A Retry-After over
//     RetryPolicy.MaxRetryAfter (10 s) is returned, not waited, whatever the
//     status;
//   - after an event stream ends, the first reconnect waits the stream's
//     last retry field plus the jitter; later ones follow the rules above,
//     with no attempt cap (only the wait's deadline).
//
// The rules are one pure function whose cases, clients/testdata/retry.json,
// the three official clients' unit tests run alike.
//
// Compare errors with errors.Is and the sentinels (ErrInboxGone,
// ErrCreationLimit, ErrRateLimited, ErrWaitTimeout, ErrUnreachable, ...);
// errors.As gives the *Error with the method and URL, the status, the stable
// code, the message, the details and the request id. Every error names the
// method and URL it went to (never a cookie).
//
// # Gone
//
// After Inbox.Delete, or once the service refuses the inbox's session (it
// expired, or was deleted through another copy of the jar), every method
// returns ErrInboxGone (which also matches ErrSessionInvalid); after Delete
// without sending a request. Delete itself is idempotent: deleting a gone
// inbox is no error (DeleteExisted says whether it still existed).
//
// # Waiting
//
// Inbox.WaitForMessage returns the oldest message that matches a Match and
// is new in the sense of Match.Since: SinceUnseen (the default: not yet
// returned by this Inbox from a wait or Message, so a "resend code" test
// calls the same wait twice and gets the second code), SinceNow(),
// SinceMessage(id) or SinceTime(t). It follows the event stream, lists the
// messages after every (re)connect, and when the stream is unavailable twice
// in a row (no answer within the open timeout, an error answer, or a stream
// that sends nothing, not even a heartbeat, within the idle timeout) polls
// the message list every 5 seconds (never faster, as the API asks). It keeps
// going across node restarts and outages until its context's deadline
// (DefaultWaitTimeout, 20 s, when the context has none), then fails with
// ErrWaitTimeout, whose text says why: the messages that arrived and did not
// match, or that none did, or the last error. When no attempt has had any
// HTTP answer for 10 s (WithUnreachableAfter), it fails early with
// ErrUnreachable. Failed messages (status "failed": the service could not
// parse them) are returned like the others. WaitForMessages waits for n
// messages; ExpectNoMessage asserts that none arrives within a window.
//
// Inbox.State and Client.Restore carry an inbox between processes in the
// JSON format the official clients share: a state written by the
// TypeScript or Python client restores here.
//
// Links, LinksWithText, Code and Codes are the helpers test authors
// otherwise write by hand: the links of a message (text and HTML,
// unescaped; with the anchors' text) and its verification code (the digits
// next to a word such as "code", not the order number before them).
//
// # Events
//
// Inbox.Events follows GET /events: it yields a MessageReceived event per
// new message. When the stream ends or breaks while the inbox lives, it
// reconnects with exponential backoff and full jitter, then lists the
// messages and yields those it has not yet yielded, so nothing is missed
// across a reconnect. It never opens two streams for one Inbox (a second
// Events or WaitForMessage on the same Inbox while one runs fails with
// ErrStreamBusy). The service keeps one stream per inbox: when it ends a
// stream because another program opened one on the same inbox (": replaced"),
// the client logs a warning and polls for a minute before taking the stream
// back, so two programs do not cut each other off in turn. Events ends with
// ErrInboxGone when the inbox expired or was deleted: an expired inbox
// cannot be recovered, create a new one; and with the wait-timeout error at
// its context's deadline (20 s when it has none).
package client

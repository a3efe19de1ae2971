// Package client is the official Go client of Mayfly, the temporary
// receive-only inbox service, and of any service that follows the same API
// (spec.md, v1). It uses only the standard library.
//
// The common use is a test of a signup flow: create an inbox, have the
// system under test send mail to its address, wait for the message, read the
// code:
//
//	c, _ := client.New("https://mayfly.example/v1")
//	inbox, err := c.CreateInbox(ctx, 10*time.Minute)
//	// ... sign up with inbox.Mailbox().Address ...
//	msg, err := inbox.WaitForMessage(ctx, client.Match{Subject: regexp.MustCompile(`Your code`)})
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
// The client retries exactly what the API allows, and nothing more:
//
//   - a safe read (GET) answered 500 or 503 is retried with exponential
//     backoff and full jitter (a random wait between zero and
//     RetryPolicy.BaseDelay·2^attempt, capped at MaxDelay), at most
//     RetryPolicy.MaxAttempts times in all; a Retry-After longer than the
//     drawn wait is honoured;
//   - a 429 that carries Retry-After (the request rate: "Retry-After: 1") is
//     waited out and the call repeated, for every call but creation: the
//     service refused the request before doing anything;
//   - POST /mailboxes is never retried: not after a timeout or a connection
//     error (it may have created an inbox), and a creation-limit 429 is
//     returned with the wait the service asked for (Error.RetryAfter), not
//     slept on;
//   - any other error is returned at once, as an *Error for an API error.
//
// Compare errors with errors.Is and the sentinels (ErrSessionInvalid,
// ErrCreationLimit, ErrInboxGone, ...); errors.As gives the *Error with the
// status, the stable code, the message and the request id.
//
// # Events
//
// Inbox.Events follows GET /events: it yields a MessageReceived event per
// new message. When the stream ends or breaks while the inbox lives, it
// reconnects with exponential backoff and full jitter, then lists the
// messages and yields those it has not yet yielded, so nothing is missed
// across a reconnect. It never opens two streams for one Inbox (a second
// Events or WaitForMessage on the same Inbox while one runs fails with
// ErrStreamBusy). It ends with ErrInboxGone when the inbox expired or was
// deleted: an expired inbox cannot be recovered, create a new one.
//
// Inbox.WaitForMessage returns the first message matching a Match, whether it
// arrived before or after the call, with its bodies. It uses the event stream
// and, when the stream is unavailable twice in a row (no answer within the
// open timeout, an error answer, or a stream that sends nothing, not even a
// heartbeat, within the idle timeout), falls back to polling the message list
// every 5 seconds (never faster, as the API asks).
package client

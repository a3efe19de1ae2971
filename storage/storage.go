// Package storage keeps Mayfly's mailboxes and messages in Redis (standalone or
// Cluster) and owns the vocabulary the edge and ingest nodes share.
//
// Every key of one mailbox carries the mailbox's tag in braces, so each
// operation on a mailbox is one Lua script call in one slot. The tag is the
// random local part of the mailbox's address: an SMTP recipient and a session
// cookie both name the slot directly, with no index lookup.
//
// storage deliberately knows nothing about HTTP, SMTP, cookies or rate limits.
package storage

import (
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Errors returned by Store. Compare with errors.Is.
var (
	// ErrSessionInvalid: the session credential does not name a live session
	// (wrong secret, mailbox expired or destroyed).
	ErrSessionInvalid = errors.New("storage: session invalid")
	// ErrCredentialInvalid: a mailbox-scoped credential does not match the mailbox.
	ErrCredentialInvalid = errors.New("storage: mailbox credential invalid")
	// ErrMailboxNotFound: no live mailbox (expired, destroyed or never created).
	ErrMailboxNotFound = errors.New("storage: mailbox not found")
	// ErrMessageNotFound: no such message in the session's mailbox.
	ErrMessageNotFound = errors.New("storage: message not found")
	// ErrUnavailable: Redis did not answer in time or answered with an error.
	// The wrapped error carries the detail for logs; never show it to a client.
	ErrUnavailable = errors.New("storage: redis unavailable")
)

// Status is a message's processing state.
type Status string

// The message states of the API.
const (
	StatusPending Status = "pending"
	StatusReady   Status = "ready"
	StatusFailed  Status = "failed"
)

// Valid reports whether s is one of the defined states.
func (s Status) Valid() bool {
	return s == StatusPending || s == StatusReady || s == StatusFailed
}

// Mailbox is a live inbox.
type Mailbox struct {
	ID           uuid.UUID
	Address      string // local@domain, lower case; local part == Tag
	CreatedAt    time.Time
	ExpiresAt    time.Time
	MaxExpiresAt time.Time
}

// Tag returns the mailbox's hash tag (the local part of its address).
func (m Mailbox) Tag() string { return TagOf(m.Address) }

// TagOf returns the tag an address names: its local part, lower-cased
// (ASCII only, see LowerASCII). It does not say whether such a mailbox
// exists, or whether the tag is valid.
func TagOf(address string) string {
	local, _, _ := strings.Cut(address, "@")
	return LowerASCII(local)
}

// LowerASCII lower-cases the ASCII letters A-Z of s and leaves every other
// byte alone. Addresses are compared in this form, never with Unicode case
// folding (strings.ToLower, strings.EqualFold), which maps the Kelvin sign
// U+212A to "k" and U+0130 (I with a dot) to "i": a non-ASCII address would
// then reach an ASCII mailbox. Bytes of a multi-byte UTF-8 sequence are all
// 0x80 or above, so they are never touched.
func LowerASCII(s string) string {
	i := 0
	for i < len(s) && (s[i] < 'A' || s[i] > 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

// Summary is what the message list shows of a message.
type Summary struct {
	ID         uuid.UUID
	From       string
	Subject    string
	ReceivedAt time.Time
	Status     Status
	// StreamID is the message's entry in the mailbox stream; it orders
	// messages and lets the events stream resume after a known message.
	StreamID string
	// Duplicate is set by Deliver only: a message with the same delivery
	// key was already stored, and nothing new was.
	Duplicate bool
}

// Message is one message with its bodies. Bodies are empty unless Status is
// StatusReady.
type Message struct {
	Summary
	Text string
	HTML string
}

// NewMessage is what ingest hands to Deliver.
type NewMessage struct {
	From    string
	Subject string
	Status  Status
	Text    string
	HTML    string
	// Key makes the delivery idempotent per mailbox: while a message
	// delivered with the same key is still stored in the mailbox, Deliver
	// stores nothing and reports that one (Summary.Duplicate). Use
	// DeliveryKey(raw bytes); empty means no deduplication.
	Key string
}

// Page selects a slice of the newest-first message list.
type Page struct {
	Limit  int
	Offset int
}

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
	// ErrBadSubaddress: a recipient's local part has a '+' and what follows
	// it is no valid tag (see ParseRecipient).
	ErrBadSubaddress = errors.New("storage: bad sub-address tag")
	// ErrLocalPartTooLong: a sub-addressed recipient's local part is over
	// 64 octets (RFC 5321, 4.5.3.1.1).
	ErrLocalPartTooLong = errors.New("storage: local part over 64 octets")
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

// Recipient is an SMTP recipient as Mayfly reads it (RFC 5233
// sub-addressing): mail to local+tag@domain goes to the inbox local@domain.
type Recipient struct {
	// Box is the inbox's address, local@domain.
	Box string
	// To is the address as accepted: Box, or local+tag@domain. Both are
	// lower-cased (ASCII only, LowerASCII).
	To string
}

// Tagged reports whether r names a sub-address of its inbox.
func (r Recipient) Tagged() bool { return r.To != r.Box }

// Sub-address bounds: a tag is 1 to MaxSubaddressTag characters of A-Z a-z
// 0-9 . _ -, after the first '+' of the local part; the local part with it
// is at most MaxLocalPart octets (RFC 5321).
const (
	MaxSubaddressTag = 64
	MaxLocalPart     = 64
)

// ParseRecipient reads address as Mayfly's recipients are read: lower-cased
// (ASCII only), and when its local part holds a '+', split into the inbox
// local@domain and the tag after the first '+'. It does not say whether the
// inbox exists.
// Errors: ErrBadSubaddress (an empty tag, a second '+', any other character
// than A-Z a-z 0-9 . _ -, more than MaxSubaddressTag of them),
// ErrLocalPartTooLong (a tagged local part over MaxLocalPart octets).
func ParseRecipient(address string) (Recipient, error) {
	lower := LowerASCII(address)
	at := strings.LastIndexByte(lower, '@')
	if at < 0 {
		return Recipient{Box: lower, To: lower}, nil
	}
	local, domain := lower[:at], lower[at:]
	base, tag, tagged := strings.Cut(local, "+")
	if !tagged {
		return Recipient{Box: lower, To: lower}, nil
	}
	if !validSubaddressTag(tag) {
		return Recipient{}, ErrBadSubaddress
	}
	if len(local) > MaxLocalPart {
		return Recipient{}, ErrLocalPartTooLong
	}
	return Recipient{Box: base + domain, To: lower}, nil
}

// validSubaddressTag is the tag grammar of ParseRecipient, on a lower-cased
// tag.
func validSubaddressTag(tag string) bool {
	if len(tag) == 0 || len(tag) > MaxSubaddressTag {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Summary is what the message list shows of a message.
type Summary struct {
	ID uuid.UUID
	// To is the envelope recipient the message arrived for (see Recipient);
	// empty when it was stored before Layout20261127 and read without its
	// mailbox's address (events: the reader knows the inbox's address).
	To         string
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

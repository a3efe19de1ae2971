package ingest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/emersion/go-smtp"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// The refusals the SMTP server makes itself. storage's and ratelimit's
// errors, and go-smtp's data errors, are mapped by the same table.
var (
	errRelayDenied       = errors.New("ingest: recipient domain is not ours")
	errTooManyRecipients = errors.New("ingest: too many recipients")
	errConnRate          = errors.New("ingest: connection rate limit")
	errMailRate          = errors.New("ingest: transaction rate limit")
	errIPSessions        = errors.New("ingest: too many sessions from one address")
	errNetSessions       = errors.New("ingest: too many sessions from one network")
	errIPBuffer          = errors.New("ingest: one client's share of the buffer budget spent")
	errSlowTransfer      = errors.New("ingest: message transfer under the minimum rate")
	errBusy              = errors.New("ingest: session limit reached")
	errOverloaded        = errors.New("ingest: no parse slot or buffer room")
	errShuttingDown      = errors.New("ingest: shutting down")
	errHungUp            = errors.New("ingest: session already refused")
	errRefusedRcpts      = errors.New("ingest: too many refused recipients")
	errTLSRequired       = errors.New("ingest: MAIL before STARTTLS")
)

// replyRow is one line of the reply table: the errors it matches, what the
// sender sees, and the reason label of the metrics.
type replyRow struct {
	errs    []error
	code    int
	enh     smtp.EnhancedCode
	message string
	reason  string
}

// replies is the one table from errors to SMTP replies; the README's SMTP
// table mirrors it. The first row whose error matches (errors.Is) wins.
// Messages are fixed strings: no error text of Redis, go-smtp or the Go
// runtime ever reaches the wire, because go-smtp writes a non-SMTPError's
// text verbatim.
var replies = []replyRow{
	{[]error{errRelayDenied}, 550, smtp.EnhancedCode{5, 7, 1},
		"Relaying denied: this server accepts mail only for its own domains", "relay_denied"},
	{[]error{storage.ErrMailboxNotFound}, 550, smtp.EnhancedCode{5, 1, 1},
		"No such mailbox: unknown, expired or deleted", "no_mailbox"},
	{[]error{storage.ErrBadSubaddress}, 553, smtp.EnhancedCode{5, 1, 3},
		"Bad sub-address tag: 1-64 of A-Z a-z 0-9 . _ - after the first +", "bad_subaddress"},
	{[]error{storage.ErrLocalPartTooLong}, 553, smtp.EnhancedCode{5, 1, 3},
		"Bad sub-address: local part over 64 octets", "local_part_too_long"},
	{[]error{errTLSRequired}, 530, smtp.EnhancedCode{5, 7, 0},
		"Must issue a STARTTLS command first", "tls_required"},
	{[]error{errTooManyRecipients}, 452, smtp.EnhancedCode{4, 5, 3},
		"Too many recipients; send the rest in another transaction", "too_many_recipients"},
	{[]error{smtp.ErrDataTooLarge}, 552, smtp.EnhancedCode{5, 3, 4},
		"Message too big for this server", "too_large"},
	{[]error{smtp.ErrTooLongLine}, 500, smtp.EnhancedCode{5, 5, 2},
		"Line too long; closing connection", "line_too_long"},
	{[]error{errConnRate}, 421, smtp.EnhancedCode{4, 7, 0},
		"Too many connections from your address; try again later", "conn_rate"},
	{[]error{errMailRate}, 421, smtp.EnhancedCode{4, 7, 0},
		"Too many messages from your address; try again later", "mail_rate"},
	{[]error{errIPSessions}, 421, smtp.EnhancedCode{4, 7, 0},
		"Too many open sessions from your address; try again later", "ip_sessions"},
	{[]error{errNetSessions}, 421, smtp.EnhancedCode{4, 7, 0},
		"Too many open sessions from your network; try again later", "net_sessions"},
	{[]error{errRefusedRcpts}, 421, smtp.EnhancedCode{4, 7, 0},
		"Too many unknown recipients; closing connection", "refused_rcpts"},
	{[]error{errBusy}, 421, smtp.EnhancedCode{4, 4, 5},
		"Server busy; try again later", "busy"},
	{[]error{errShuttingDown, errHungUp}, 421, smtp.EnhancedCode{4, 3, 2},
		"Service shutting down; try again later", "shutdown"},
	// Before the deadline row: a Redis call that ran out of time is Redis
	// being unavailable (retry later), not the client being too slow.
	{[]error{storage.ErrUnavailable, ratelimit.ErrUnavailable}, 451, smtp.EnhancedCode{4, 3, 0},
		"Temporary local problem; try again later", "unavailable"},
	// Before the deadline row: the rate watch ends a slow transfer with a
	// read deadline.
	{[]error{errSlowTransfer}, 421, smtp.EnhancedCode{4, 4, 2},
		"Transfer too slow; closing connection", "too_slow"},
	{[]error{os.ErrDeadlineExceeded}, 421, smtp.EnhancedCode{4, 4, 2},
		"Timeout; closing connection", "timeout"},
	{[]error{errOverloaded}, 451, smtp.EnhancedCode{4, 3, 1},
		"Server overloaded; try again later", "overloaded"},
	{[]error{errIPBuffer}, 451, smtp.EnhancedCode{4, 7, 0},
		"Too much mail in transfer from your address; try again later", "ip_buffer"},
	// The client went away or reset the connection mid-DATA: its doing, not
	// a defect of ours (counted as aborted, logged at info).
	{[]error{io.ErrUnexpectedEOF, io.EOF, smtp.ErrDataReset, syscall.ECONNRESET, syscall.EPIPE, net.ErrClosed}, 451, smtp.EnhancedCode{4, 3, 0},
		"Message transfer aborted", "aborted"},
}

// unknownReply answers errors the table does not name: temporary, so the
// sender retries instead of bouncing the mail because of our defect.
var unknownReply = replyRow{code: 451, enh: smtp.EnhancedCode{4, 3, 0},
	message: "Temporary local problem; try again later", reason: "internal"}

// lookup returns the row for err.
func lookup(err error) replyRow {
	for _, r := range replies {
		for _, e := range r.errs {
			if errors.Is(err, e) {
				return r
			}
		}
	}
	return unknownReply
}

// reply turns any error into what the sender sees: always an *smtp.SMTPError
// from the table (nil for nil). Every error the server hands to go-smtp or
// writes itself goes through here.
func reply(err error) error {
	if err == nil {
		return nil
	}
	r := lookup(err)
	return &smtp.SMTPError{Code: r.code, EnhancedCode: r.enh, Message: r.message}
}

// reason is the metrics label of err: the reason column of its row.
func reason(err error) string { return lookup(err).reason }

// hangsUp reports whether the reply to err ends the connection (RFC 5321
// 3.8: a 421 reply is followed by closing the transmission channel).
func hangsUp(err error) bool { return lookup(err).code == 421 || errors.Is(err, smtp.ErrTooLongLine) }

// writeReply writes a reply outside go-smtp's session loop (refusals at
// accept time, before the greeting).
func writeReply(w io.Writer, err error) error {
	var e *smtp.SMTPError
	if !errors.As(reply(err), &e) {
		return nil
	}
	_, werr := fmt.Fprintf(w, "%d %d.%d.%d %s\r\n", e.Code, e.EnhancedCode[0], e.EnhancedCode[1], e.EnhancedCode[2], e.Message)
	return werr
}

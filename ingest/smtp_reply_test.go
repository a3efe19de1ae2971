package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

// TestReply: every error becomes an *smtp.SMTPError from the table, and the
// text of the error (Redis's, the runtime's) never becomes the message.
func TestReply(t *testing.T) {
	const secret = "ERR redis says: dial tcp 10.0.0.7:6379: connection refused"
	cause := errors.New(secret)
	tests := []struct {
		err  error
		code int
		enh  smtp.EnhancedCode
	}{
		{errRelayDenied, 550, smtp.EnhancedCode{5, 7, 1}},
		{storage.ErrMailboxNotFound, 550, smtp.EnhancedCode{5, 1, 1}},
		{errTooManyRecipients, 452, smtp.EnhancedCode{4, 5, 3}},
		{smtp.ErrDataTooLarge, 552, smtp.EnhancedCode{5, 3, 4}},
		{fmt.Errorf("read message: %w", smtp.ErrTooLongLine), 500, smtp.EnhancedCode{5, 5, 2}},
		{errConnRate, 421, smtp.EnhancedCode{4, 7, 0}},
		{errMailRate, 421, smtp.EnhancedCode{4, 7, 0}},
		{errIPSessions, 421, smtp.EnhancedCode{4, 7, 0}},
		{errBusy, 421, smtp.EnhancedCode{4, 4, 5}},
		{errShuttingDown, 421, smtp.EnhancedCode{4, 3, 2}},
		{fmt.Errorf("read message: %w", os.ErrDeadlineExceeded), 421, smtp.EnhancedCode{4, 4, 2}},
		{errOverloaded, 451, smtp.EnhancedCode{4, 3, 1}},
		{fmt.Errorf("%w: deliver: %w", storage.ErrUnavailable, cause), 451, smtp.EnhancedCode{4, 3, 0}},
		{fmt.Errorf("%w: %w", ratelimit.ErrUnavailable, context.DeadlineExceeded), 451, smtp.EnhancedCode{4, 3, 0}},
		// A Redis call that hit its deadline is Redis unavailable, not the
		// client's timeout: retry later, do not close the session.
		{fmt.Errorf("%w: exists: %w", storage.ErrUnavailable, os.ErrDeadlineExceeded), 451, smtp.EnhancedCode{4, 3, 0}},
		{fmt.Errorf("%w: %w", ratelimit.ErrUnavailable, os.ErrDeadlineExceeded), 451, smtp.EnhancedCode{4, 3, 0}},
		{smtp.ErrDataReset, 451, smtp.EnhancedCode{4, 3, 0}},
		// A client that resets its connection during DATA aborted the
		// transfer: not our defect.
		{fmt.Errorf("read message: %w", syscall.ECONNRESET), 451, smtp.EnhancedCode{4, 3, 0}},
		{fmt.Errorf("read message: %w", io.EOF), 451, smtp.EnhancedCode{4, 3, 0}},
		{cause, 451, smtp.EnhancedCode{4, 3, 0}}, // unknown: temporary
		{&smtp.SMTPError{Code: 554, Message: secret}, 451, smtp.EnhancedCode{4, 3, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			var got *smtp.SMTPError
			if !errors.As(reply(tc.err), &got) {
				t.Fatalf("reply(%v) = %T, want *smtp.SMTPError", tc.err, reply(tc.err))
			}
			if got.Code != tc.code || got.EnhancedCode != tc.enh {
				t.Errorf("reply(%v) = %d %v, want %d %v", tc.err, got.Code, got.EnhancedCode, tc.code, tc.enh)
			}
			for _, leak := range []string{"redis", "ERR", "dial", "10.0.0.7", "refused", "deadline", "ingest:", "storage:"} {
				if strings.Contains(got.Message, leak) {
					t.Errorf("reply(%v) message %q holds %q", tc.err, got.Message, leak)
				}
			}
			if got, want := hangsUp(tc.err), tc.code == 421 || tc.code == 500; got != want {
				t.Errorf("hangsUp(%v) = %v, want %v", tc.err, got, want)
			}
		})
	}
	if err := reply(nil); err != nil {
		t.Errorf("reply(nil) = %v, want nil", err)
	}
}

// TestAbortIsNotInternal: a client's reset or hang-up during DATA is counted
// as aborted; only errors the table does not know are "internal".
func TestAbortIsNotInternal(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("read message: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}),
		fmt.Errorf("read message: %w", io.EOF),
		fmt.Errorf("read message: %w", io.ErrUnexpectedEOF),
	} {
		if got := reason(err); got != "aborted" {
			t.Errorf("reason(%v) = %q, want aborted", err, got)
		}
	}
}

// TestReplyTableReasons: every row has a distinct, non-empty metrics label
// and a 4xx or 5xx code.
func TestReplyTableReasons(t *testing.T) {
	seen := map[string]bool{unknownReply.reason: true}
	for _, r := range replies {
		if r.reason == "" || seen[r.reason] {
			t.Errorf("reason %q of %d %v is empty or repeated", r.reason, r.code, r.enh)
		}
		seen[r.reason] = true
		if r.code < 400 || r.code > 599 || r.enh[0] != r.code/100 {
			t.Errorf("row %q: code %d with enhanced code %v", r.reason, r.code, r.enh)
		}
	}
}

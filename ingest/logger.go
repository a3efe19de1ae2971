package ingest

import (
	"fmt"
	"log/slog"
	"strings"
)

// smtpLogger sends go-smtp's internal log lines (connection errors, recovered
// panics) to slog.
type smtpLogger struct{ log *slog.Logger }

func (l smtpLogger) Printf(format string, v ...any) { l.print(fmt.Sprintf(format, v...)) }
func (l smtpLogger) Println(v ...any)               { l.print(fmt.Sprintln(v...)) }

func (l smtpLogger) print(msg string) {
	msg = strings.TrimSpace(msg)
	if strings.Contains(msg, "panic") {
		l.log.Error("smtp panic", "err", msg)
		return
	}
	// Mostly clients that vanish or fail the TLS handshake: noise at info.
	l.log.Debug("smtp connection error", "err", msg)
}

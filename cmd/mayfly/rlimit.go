package main

import (
	"log/slog"
	"syscall"
)

// raiseFDLimit raises the soft limit on open files to the hard limit (Go
// does this itself since 1.19; doing it here makes it explicit and logged)
// and returns how many connections the HTTP listener may hold: 90% of the
// limit, less a reserve for Redis connections, logs and the admin listener.
func raiseFDLimit(log *slog.Logger) (budget int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("file descriptor limit unknown", "err", err)
		return 1 << 30 // unknown: leave MAYFLY_HTTP_MAX_CONNS alone
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("file descriptor limit not raised", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	budget = max(64, int(min(lim.Cur, 1<<30))*9/10-256)
	log.Info("file descriptor limit", "soft", lim.Cur, "hard", lim.Max, "http_conn_budget", budget)
	return budget
}

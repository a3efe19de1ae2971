package load

import (
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// Listen opens addr for a bench server and logs
// {"msg":"listening","kind":kind,"addr":…} on stderr, the line benchrun
// (like mayfly's tests) waits for. It exits the process if addr is taken.
func Listen(kind, addr string) (net.Listener, *slog.Logger) {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("listen", "err", err)
		os.Exit(1)
	}
	log.Info("listening", "kind", kind, "addr", ln.Addr().String())
	return ln, log
}

// OnSignal calls stop once on SIGINT or SIGTERM.
func OnSignal(stop func()) {
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		stop()
	}()
}

// Parallel calls fn(i) for i in [0, n) from up to workers goroutines and
// returns the first error; after one, no new i starts.
func Parallel(n, workers int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

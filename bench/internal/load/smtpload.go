package load

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// SMTPLoad sends messages over SMTP from Conns concurrent connections.
type SMTPLoad struct {
	Addr     string
	Rcpts    []string // recipients, used round robin
	Conns    int      // concurrent connections
	Msgs     int      // messages in all; 0: until Duration
	Duration time.Duration
	PerConn  int     // messages per connection (RSET between); 1: a connection per message
	Size     int     // bytes per message
	Rate     float64 // messages per second in all, evenly paced; 0: as fast as possible
	Sources  *SourcePool
	Timeout  time.Duration
	// Subject names message i (default "load-<i>").
	Subject func(i int) string
	// Accepted, if set, is called with each message the server accepted
	// and the time its 250 arrived.
	Accepted func(i int, subject string, at time.Time)
}

// Run sends until Msgs messages are done or Duration has passed (or ctx
// ends). The latency of a message is what its sender waited: connect,
// greeting and EHLO included for the first message of a connection.
func (l SMTPLoad) Run(ctx context.Context) Result {
	if l.PerConn < 1 {
		l.PerConn = 1
	}
	if l.Timeout == 0 {
		l.Timeout = 10 * time.Second
	}
	if l.Subject == nil {
		l.Subject = func(i int) string { return "load-" + strconv.Itoa(i) }
	}
	if l.Sources == nil {
		l.Sources = &SourcePool{}
	}
	if l.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.Duration)
		defer cancel()
	}
	var tokens <-chan time.Time
	if l.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / l.Rate))
		defer t.Stop()
		tokens = t.C
	}
	var (
		next, conns atomic.Int64
		mu          sync.Mutex
		lat         []time.Duration
		errs        int
		firstErr    string
	)
	fail := func(err error) {
		mu.Lock()
		errs++
		if firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range l.Conns {
		wg.Go(func() {
			var c *SMTPConn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			my := make([]time.Duration, 0, 1024)
			defer func() { mu.Lock(); lat = append(lat, my...); mu.Unlock() }()
			for {
				if tokens != nil {
					select {
					case <-tokens:
					case <-ctx.Done():
						return
					}
				}
				if ctx.Err() != nil {
					return
				}
				i := int(next.Add(1) - 1)
				if l.Msgs > 0 && i >= l.Msgs {
					return
				}
				t0 := time.Now()
				if c == nil {
					var err error
					c, err = DialSMTP(l.Addr, l.Sources.Addr(int(conns.Add(1))), l.Timeout)
					if err != nil {
						fail(err)
						continue
					}
				}
				subject := l.Subject(i)
				err := c.Send("load@bench.example", l.Rcpts[i%len(l.Rcpts)], Message(subject, l.Size), l.Timeout)
				if err != nil {
					if ctx.Err() != nil && l.Msgs == 0 {
						return // cut off by the end of the run, not failed
					}
					fail(err)
					c.Abort()
					c = nil
					continue
				}
				at := time.Now()
				my = append(my, at.Sub(t0))
				if l.Accepted != nil {
					l.Accepted(i, subject, at)
				}
				if c.sent >= l.PerConn {
					if err := c.Close(); err != nil {
						fail(err)
					}
					c = nil
				}
			}
		})
	}
	wg.Wait()
	r := Summarize("smtpload", lat, errs, time.Since(start))
	r.FirstErr = firstErr
	r.Extra = map[string]float64{"connections": float64(conns.Load())}
	return r
}

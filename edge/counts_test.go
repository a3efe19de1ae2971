package edge

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
)

// blockingLimiter holds every AllowRequest until release is closed, and
// admits the clients whose key is an even number.
type blockingLimiter struct {
	Limiter
	entered chan struct{}
	release chan struct{}
}

func (l *blockingLimiter) AllowRequest(_ context.Context, client string) (ratelimit.Decision, error) {
	l.entered <- struct{}{}
	<-l.release
	n, _ := strconv.Atoi(client)
	return ratelimit.Decision{Allowed: n%2 == 0}, nil
}

// A count never waits for a worker: with every idle worker busy, the
// counts past them run at once on goroutines of their own, and each job
// gets its own decision back.
func TestCountWorkersNeverWait(t *testing.T) {
	const n = countWorkersIdle + 8
	l := &blockingLimiter{entered: make(chan struct{}, n), release: make(chan struct{})}
	s := New(nil, l, Config{}, nil, nil)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	jobs := make([]*countJob, n)
	started := make(chan struct{})
	go func() {
		defer close(started)
		for i := range jobs {
			jobs[i] = s.startCount(&call{ctx: context.Background(), client: strconv.Itoa(i)})
		}
	}()
	timeout := time.After(5 * time.Second)
	for i := range n {
		select {
		case <-l.entered:
		case <-timeout:
			t.Fatalf("%d of %d counts running at once, want all", i, n)
		}
	}
	close(l.release)
	<-started
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			d, err := j.wait()
			if err != nil || d.Allowed != (i%2 == 0) {
				t.Errorf("count %d: %+v, %v; want allowed %v", i, d, err, i%2 == 0)
			}
		})
	}
	wg.Wait()
}

package edge

import (
	"sync"

	"github.com/mayfly/mayfly/ratelimit"
)

// idleWorkers run jobs on goroutines that wait for work between jobs. A
// goroutine started per job begins with a small stack and grows it through
// the job's call chain every time (runtime.newstack and copystack); a
// waiting worker keeps its grown stack. A job never waits for a worker:
// when none is idle, it gets a goroutine of its own.
type idleWorkers[T any] struct {
	do   func(T)
	idle chan T
	stop chan struct{} // closed by Shutdown: the idle workers end
}

func newIdleWorkers[T any](n int, do func(T)) *idleWorkers[T] {
	w := &idleWorkers[T]{do: do, idle: make(chan T), stop: make(chan struct{})}
	for range n {
		go func() {
			for {
				select {
				case j := <-w.idle:
					do(j)
				case <-w.stop:
					return
				}
			}
		}()
	}
	return w
}

// run does j on an idle worker, or on a new goroutine.
func (w *idleWorkers[T]) run(j T) {
	select {
	case w.idle <- j:
	default:
		go w.do(j)
	}
}

// countWorkersIdle is how many goroutines wait for countWith's request
// counts: about the requests one node has in flight at once under load.
const countWorkersIdle = 64

// countJob is one request count: its call in, its decision out, done
// signalled once when they are set.
type countJob struct {
	cl   *call
	d    ratelimit.Decision
	err  error
	done chan struct{}
}

var countJobs = sync.Pool{New: func() any { return &countJob{done: make(chan struct{}, 1)} }}

// startCount counts cl's request on an idle count worker (countWith: a
// goroutine per page grew its stack through rueidis's call chain, about
// 4 % of the edge's CPU under bench scenario A); the job's wait returns
// the decision.
func (s *Server) startCount(cl *call) *countJob {
	j := countJobs.Get().(*countJob)
	j.cl = cl
	s.counts.run(j)
	return j
}

func (s *Server) count(j *countJob) {
	j.d, j.err = s.allowRequest(true, j.cl)
	j.done <- struct{}{}
}

// wait returns the job's decision once it is set, and gives the job back.
func (j *countJob) wait() (ratelimit.Decision, error) {
	<-j.done
	d, err := j.d, j.err
	*j = countJob{done: j.done}
	countJobs.Put(j)
	return d, err
}

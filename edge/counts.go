package edge

import (
	"sync"

	"github.com/mayfly/mayfly/ratelimit"
)

// countWorkers run countWith's request counts on goroutines that wait for
// work between requests. A goroutine started per request begins with a
// small stack and grows it through rueidis's call chain every time
// (runtime.newstack and copystack: about 4 % of the edge's CPU under bench
// scenario A); a waiting worker keeps its grown stack. A count never waits
// for a worker: when none is idle, it gets a goroutine of its own, as before.
type countWorkers struct {
	s    *Server
	idle chan *countJob
	stop chan struct{} // closed by Shutdown: the idle workers end
}

// countWorkersIdle is how many goroutines wait for counts: about the
// requests one node has in flight at once under load.
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

func newCountWorkers(s *Server) *countWorkers {
	w := &countWorkers{s: s, idle: make(chan *countJob), stop: make(chan struct{})}
	for range countWorkersIdle {
		go func() {
			for {
				select {
				case j := <-w.idle:
					w.count(j)
				case <-w.stop:
					return
				}
			}
		}()
	}
	return w
}

// start counts cl's request on an idle worker, or on a new goroutine; the
// job's done receives once its decision is set (wait).
func (w *countWorkers) start(cl *call) *countJob {
	j := countJobs.Get().(*countJob)
	j.cl = cl
	select {
	case w.idle <- j:
	default:
		go w.count(j)
	}
	return j
}

func (w *countWorkers) count(j *countJob) {
	j.d, j.err = w.s.allowRequest(true, j.cl)
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

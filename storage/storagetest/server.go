package storagetest

import (
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a redis-server of a test's own.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been waited for
}

// launch starts redis-server on the loopback port with args added and
// reports whether it came to answer there as itself (by its process id in
// INFO) within 10 s; if not, it is killed. A port found free is only a
// hint: another test's server (tests run in parallel, packages in parallel
// processes) or an outgoing connection may take it before redis-server
// binds it, which then exits, or another server answers there.
func launch(t testing.TB, port int, args ...string) (*process, bool) {
	t.Helper()
	cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (installed by make test's install step): %v", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid)
	for range 200 {
		select {
		case <-p.exited:
			return nil, false
		default:
		}
		out, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "INFO", "server").Output()
		if err == nil && slices.Contains(strings.Fields(string(out)), want) {
			return p, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
	return nil, false
}

// kill ends the process at once, as a crash would, and waits for it.
func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// portFree reports whether the loopback port can be listened on now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Server is a standalone redis-server of the test's own, for tests that
// stop, restart, stall or cut it; the shared cluster is never disturbed. It
// listens below Linux's ephemeral range (32768 up), so that while it is
// stopped no outgoing connection of another test takes its port, which a
// restart then needs. It dies with the test.
type Server struct {
	t    testing.TB
	dir  string
	port int
	p    *process // nil while stopped
}

// StartServer starts a Server on a free port (5000-9999; the nodes of
// StartCluster take 10000-14999 and their buses 20000-24999).
func StartServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	for range 20 {
		s.port = 5000 + rand.IntN(5000)
		if !portFree(s.port) {
			continue
		}
		if s.p, _ = launch(t, s.port, s.args()...); s.p != nil {
			return s
		}
		t.Logf("redis-server on %s did not start (port taken?); trying another port", s.Addr())
	}
	t.Fatal("could not start a redis-server on a free port in 20 tries")
	return nil
}

func (s *Server) args() []string {
	return []string{"--dir", s.dir, "--logfile", filepath.Join(s.dir, "log")}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Kill ends the server at once, as a crash would (its data goes with it);
// Start brings it back.
func (s *Server) Kill() {
	if s.p != nil {
		s.p.kill()
		s.p = nil
	}
}

// Stop freezes the server (SIGSTOP): it keeps its connections but answers
// nothing, like a stalled process. The test's cleanup resumes it.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("SIGSTOP %s: %v", s.Addr(), err)
	}
	s.t.Cleanup(s.Cont)
}

// Cont resumes a server frozen by Stop.
func (s *Server) Cont() {
	if s.p != nil {
		s.p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Start starts the server again, on its port, empty.
func (s *Server) Start() {
	s.t.Helper()
	if s.p, _ = launch(s.t, s.port, s.args()...); s.p == nil {
		s.t.Fatalf("redis-server did not start again on %s (port taken?)", s.Addr())
	}
}

// Redis runs one command with redis-cli on the server and returns its
// output.
func (s *Server) Redis(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.port)}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("redis-cli %v: %v %s", args, err, out)
	}
	return string(out)
}

package topology

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StopNode sends SIGTERM to node, as Kubernetes, systemd or topology.sh down
// would, and waits until its process has exited (at most within); it
// returns how long that took. Its command line and environment are kept for
// StartNode.
func (tp *Topology) StopNode(n *Node, within time.Duration) time.Duration {
	tp.t.Helper()
	argv, env := procStrings(n.PID, "cmdline"), procStrings(n.PID, "environ")
	if len(argv) == 0 {
		tp.t.Fatalf("node %d: no command line: not running?", n.PID)
	}
	n.argv, n.env = argv, env
	start := time.Now()
	if err := syscall.Kill(n.PID, syscall.SIGTERM); err != nil {
		tp.t.Fatalf("kill -TERM %d: %v", n.PID, err)
	}
	for !exited(n.PID) {
		if time.Since(start) > within {
			tp.t.Fatalf("node %d still runs %v after SIGTERM", n.PID, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// StartNode starts a node that StopNode stopped again, with the same
// command line and environment (so on the same ports, which haproxy's
// server lines name), appending to the same log, and waits until its
// /readyz answers 200 (at most within). The topology's teardown stops it like the others.
func (tp *Topology) StartNode(n *Node, within time.Duration) {
	tp.t.Helper()
	if len(n.argv) == 0 {
		tp.t.Fatalf("node %s: StartNode without StopNode", n.Admin)
	}
	log, err := os.OpenFile(filepath.Join(tp.Dir, tp.name(n)+".log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tp.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(n.argv[0], n.argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = n.env, log, log
	if err := cmd.Start(); err != nil {
		tp.t.Fatalf("restart %s: %v", tp.name(n), err)
	}
	go cmd.Wait() // reaps it when the teardown stops it
	n.PID = cmd.Process.Pid
	pids, err := os.OpenFile(filepath.Join(tp.Dir, "pids"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tp.t.Fatal(err)
	}
	fmt.Fprintln(pids, n.PID)
	pids.Close()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if exited(n.PID) {
			tp.t.Fatalf("restarted %s exited (port taken?); see its log", tp.name(n))
		}
		if res, err := http.Get("http://" + n.Admin + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			tp.t.Fatalf("restarted %s not ready after %v", tp.name(n), within)
		}
	}
}

// name is the node's name in the topology's logs and haproxy's
// configuration: edge1, ingest2.
func (tp *Topology) name(n *Node) string {
	for i := range tp.Edges {
		if tp.Edges[i].Admin == n.Admin {
			return "edge" + strconv.Itoa(i+1)
		}
	}
	for i := range tp.Ingests {
		if tp.Ingests[i].Admin == n.Admin {
			return "ingest" + strconv.Itoa(i+1)
		}
	}
	tp.t.Fatalf("node %s is not in the topology", n.Admin)
	return ""
}

// procStrings reads a NUL-separated file of /proc/pid.
func procStrings(pid int, file string) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), file))
	if err != nil {
		return nil
	}
	var out []string
	for s := range bytes.SplitSeq(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(s))
	}
	return out
}

// exited reports whether pid is gone or a zombie (its parent, a shell that
// has exited, left it to a reaper that may not reap): either way it holds
// no port any more.
func exited(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// HAProxy sends one command to haproxy's runtime API (its stats socket)
// and returns the answer.
func (tp *Topology) HAProxy(command string) string {
	tp.t.Helper()
	c, err := net.DialTimeout("unix", tp.HAProxySock, 2*time.Second)
	if err != nil {
		tp.t.Fatalf("haproxy runtime API: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		tp.t.Fatalf("haproxy %q: %v", command, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		tp.t.Fatalf("haproxy %q: %v", command, err)
	}
	return string(b)
}

// ServerState is haproxy's view of one server (backend/server, as
// "edges/edge1"): its operational state (0 stopped, 1 starting, 2 running,
// 3 stopping: haproxy's srv_op_state) and its administrative state flags
// (srv_admin_state; 0x08 drain set on the runtime API).
func (tp *Topology) ServerState(server string) (op, admin int) {
	tp.t.Helper()
	backend, name, _ := strings.Cut(server, "/")
	out := tp.HAProxy("show servers state " + backend)
	var cols []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "#" {
			cols = f[1:]
			continue
		}
		if len(cols) == 0 || len(f) != len(cols) {
			continue
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = f[i]
		}
		if row["srv_name"] == name {
			op, _ = strconv.Atoi(row["srv_op_state"])
			admin, _ = strconv.Atoi(row["srv_admin_state"])
			return op, admin
		}
	}
	tp.t.Fatalf("haproxy shows no server %s:\n%s", server, out)
	return 0, 0
}

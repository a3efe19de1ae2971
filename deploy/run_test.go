package deploy

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// procStat is a process's state letter, parent and process group, from
// /proc; ok false when it no longer exists.
func procStat(pid int) (state string, ppid, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // state ppid pgrp ...
	ppid, _ = strconv.Atoi(f[1])
	pgid, _ = strconv.Atoi(f[2])
	return f[0], ppid, pgid, true
}

// alive reports whether pid runs; a zombie counts as gone (an orphan is
// reaped by pid 1, which may be slow or, in a container, never).
func alive(pid int) bool {
	state, _, _, ok := procStat(pid)
	return ok && state != "Z"
}

// group lists the live processes of process group pgid with their command
// lines.
func group(pgid int) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, g, ok := procStat(pid); ok && g == pgid && alive(pid) {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			out[pid] = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// makeRun is one `make run` started by startMakeRun.
type makeRun struct {
	pgid   int // make's pid, and its process group's id
	addrs  map[string]string
	tmp    string // its TMPDIR
	exited chan error
	log    string
}

func (m *makeRun) output() string { b, _ := os.ReadFile(m.log); return string(b) }

// startMakeRun starts `make run` in its own process group, with no terminal,
// free ports and a TMPDIR of its own, and waits until it is ready. A run
// that loses one of its ports to another process before binding it is
// started again on others.
func startMakeRun(t *testing.T) *makeRun {
	t.Helper()
attempts:
	for attempt := 1; ; attempt++ {
		m := &makeRun{tmp: t.TempDir(), exited: make(chan error, 1), log: filepath.Join(t.TempDir(), "make-run.log"),
			addrs: map[string]string{"MAYFLY_HTTP_ADDR": freeAddr(t), "MAYFLY_SMTP_ADDR": freeAddr(t), "MAYFLY_ADMIN_ADDR": freeAddr(t)}}
		cmd := exec.Command("make", "--no-print-directory", "run")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "TMPDIR="+m.tmp, "MAYFLY_REDIS_ADDRS=")
		for k, v := range m.addrs {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		// A file, not a pipe: Wait then returns when make exits, not when
		// the last process holding its output does.
		out, err := os.Create(m.log)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err = cmd.Start()
		out.Close()
		if err != nil {
			t.Fatal(err)
		}
		m.pgid = cmd.Process.Pid
		go func() { m.exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-m.pgid, syscall.SIGKILL) }) // only what this test started

		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			select {
			case err := <-m.exited:
				if o := m.output(); attempt < 3 && (strings.Contains(o, "already in use") || strings.Contains(o, "address already in use")) {
					t.Logf("make run lost a port (%v); again on others", err)
					continue attempts
				}
				t.Fatalf("make run exited before it was ready: %v\n%s", err, m.output())
			default:
			}
			if resp, err := http.Get("http://" + m.addrs["MAYFLY_ADMIN_ADDR"] + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return m
				}
			}
		}
		t.Fatalf("make run not ready in 3 minutes:\n%s", m.output())
	}
}

// TestMakeRunStopsOnSignal: `make run` started the way a CI script or
// `nohup make run &` does (its own process group, no terminal) and stopped
// by signalling the make process alone — SIGTERM (`kill $!`), or SIGHUP —
// leaves nothing behind: deploy/run.sh, redis-server and `bin/mayfly all`
// are gone, the ports are free and the temp dir is removed. Likewise when
// one of the servers it started is the one that is signalled.
func TestMakeRunStopsOnSignal(t *testing.T) {
	tool(t, "make")
	tool(t, "redis-server")
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		target string // which process gets the signal: "make", or a command line's part
	}{
		{"SIGTERM to make", syscall.SIGTERM, "make"},
		{"SIGHUP to make", syscall.SIGHUP, "make"},
		{"SIGHUP to run.sh", syscall.SIGHUP, "deploy/run.sh"},
		{"SIGTERM to redis-server", syscall.SIGTERM, "redis-server"},
		// SIGHUP to the node itself reloads its STARTTLS certificate and
		// never stops it (cmd/mayfly); a stop of the node ends the run.
		{"SIGTERM to bin/mayfly", syscall.SIGTERM, "bin/mayfly all"},
		{"SIGINT to the group (Ctrl-C)", syscall.SIGINT, "group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMakeRun(t)
			pgid, addrs, tmp, output := m.pgid, m.addrs, m.tmp, m.output
			exited := m.exited
			// The banner names the CLI as docs/cli.md does: `mayfly inbox`,
			// from a checkout bin/mayfly inbox, its base through MAYFLY_URL.
			banner := output()
			for _, want := range []string{"`mayfly inbox`", "addr=$(bin/mayfly inbox new)", "bin/mayfly inbox wait --subject",
				"export MAYFLY_URL=http://" + addrs["MAYFLY_HTTP_ADDR"] + "/v1"} {
				if !strings.Contains(banner, want) {
					t.Errorf("make run's banner lacks %q:\n%s", want, banner)
				}
			}
			if strings.Contains(banner, "mayfly-inbox") || strings.Contains(banner, "--base") {
				t.Errorf("make run's banner names the CLI another way (mayfly-inbox, --base):\n%s", banner)
			}
			// Its wait uses the clients' 20 s default: no --timeout of
			// another value to copy (a comment may say how to change it).
			for _, line := range strings.Split(banner, "\n") {
				if cmd, _, _ := strings.Cut(line, "#"); strings.Contains(cmd, "inbox wait") && strings.Contains(cmd, "--timeout") {
					t.Errorf("make run's banner gives the CLI's wait a --timeout other than the 20 s default: %q", line)
				}
			}
			procs := group(pgid)
			var sawRedis, sawMayfly, sawRun bool
			target := pgid
			for pid, line := range procs {
				sawRedis = sawRedis || strings.HasPrefix(line, "redis-server")
				sawMayfly = sawMayfly || strings.Contains(line, "bin/mayfly all")
				sawRun = sawRun || strings.Contains(line, "deploy/run.sh")
				// The script itself, not its watchdog (a subshell, the same
				// command line): make's child.
				if _, ppid, _, _ := procStat(pid); tc.target != "make" && strings.Contains(line, tc.target) &&
					(tc.target != "deploy/run.sh" || ppid == pgid) {
					target = pid
				}
			}
			if !sawRedis || !sawMayfly || !sawRun {
				t.Fatalf("process group of make run: %v, want run.sh, redis-server and bin/mayfly all", procs)
			}
			runDirs, _ := filepath.Glob(filepath.Join(tmp, "mayfly-run.*"))
			if len(runDirs) != 1 {
				t.Fatalf("temp dirs %v, want one mayfly-run.*", runDirs)
			}

			if tc.target == "group" {
				target = -pgid
			}
			if err := syscall.Kill(target, tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Errorf("make still runs 30 s after %s", tc.name)
			}
			deadline := time.Now().Add(15 * time.Second)
			for pid, line := range procs {
				for alive(pid) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if alive(pid) {
					t.Errorf("after %s, pid %d (%s) still runs", tc.name, pid, line)
				}
			}
			for name, addr := range addrs {
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					t.Errorf("after %s, %s %s still accepts connections", tc.name, name, addr)
				}
			}
			if _, err := os.Stat(runDirs[0]); !os.IsNotExist(err) {
				t.Errorf("after %s, %s is still there (%v)", tc.name, runDirs[0], err)
			}
			if t.Failed() {
				t.Logf("make run's output:\n%s", output())
			}
		})
	}
}

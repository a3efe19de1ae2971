package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is a server the run started: mayfly edge or ingest, a reference
// server, the flow relay. Its stderr goes to <logs>/<name>.log.
type proc struct {
	name  string
	cmd   *exec.Cmd
	addrs map[string]string // "listening" lines: kind -> address
	done  chan struct{}
	// stopped: we stopped it (it did not die on its own).
	stopped bool
}

// start runs bin with args and env added to ours, and waits until it has
// logged a {"msg":"listening","kind":k,"addr":…} line for every kind.
func (b *bench) start(name, bin string, args, env []string, kinds ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(b.logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logf
	// If the run dies, its servers die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, addrs: map[string]string{}, done: make(chan struct{})}
	b.procs = append(b.procs, p)
	ready := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(io.TeeReader(stderr, logf))
		sc.Buffer(nil, 1<<20)
		for len(kinds) > 0 && sc.Scan() {
			var line struct{ Msg, Kind, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				mu.Lock()
				p.addrs[line.Kind] = line.Addr
				all := true
				for _, k := range kinds {
					all = all && p.addrs[k] != ""
				}
				mu.Unlock()
				if all {
					once.Do(func() { close(ready) })
					break
				}
			}
		}
		// Ready: the rest only goes to the log. (Parsing every line of a
		// node that logs each message would cost the machine CPU during D.)
		io.Copy(logf, stderr)
	}()
	go func() { cmd.Wait(); close(p.done) }()
	if len(kinds) == 0 {
		return p, nil // the caller waits for it its own way
	}
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening; see %s", name, logf.Name())
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s did not log its listeners in 30s; see %s", name, logf.Name())
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits (SIGKILL after 15s).
func (p *proc) stop() {
	p.stopped = true
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// alive reports an error if p has exited.
func (p *proc) alive() error {
	if p.stopped {
		return nil
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s exited during the run: %v", p.name, p.cmd.ProcessState)
	default:
		return nil
	}
}

// runTool runs a load tool to completion and returns its stdout; stderr goes
// to the tool's log.
func (b *bench) runTool(ctx context.Context, name, bin string, args, env []string) ([]byte, error) {
	logf, err := os.OpenFile(filepath.Join(b.logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n$ %s %v\n", bin, args)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w (see %s)", name, err, logf.Name())
	}
	return out, nil
}

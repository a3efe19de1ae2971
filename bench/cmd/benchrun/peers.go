package main

import (
	"debug/buildinfo"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// peer is another mail-capture server D measures at its highest
// concurrency, beside smtpsink, so Mayfly's ingest has a ratio to a real
// product of its kind measured in the same run. A peer is run only if
// bench/run.sh could build it from the Go module proxy at its pinned
// version (bench/peers/go.mod); see bench/README.md.
type peer struct {
	name string
	addr string
	goal float64 // Mayfly's ratio to it that D 1/conn c=32 aims at
	// version is the module version the binary was built from.
	version string
}

// startPeers starts every peer whose binary is in the tools dir.
func (b *bench) startPeers() {
	bin := b.tool("mailpit")
	if _, err := os.Stat(bin); err != nil {
		return
	}
	smtp, web := freePort(), freePort()
	if smtp == "" || web == "" {
		return
	}
	// Accept every recipient, keep the default 500-message store (pruned
	// as it fills, as in use), its database in the log dir.
	args := []string{"--smtp", smtp, "--listen", web, "--database", filepath.Join(b.logs, "mailpit.db"),
		"--smtp-disable-rdns", "--quiet"}
	if _, err := b.startPlain("mailpit", bin, args, smtp); err != nil {
		progress("mailpit not started: %v", err)
		return
	}
	version := "?"
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		version = bi.Main.Path + " " + bi.Main.Version
	}
	b.peers = append(b.peers, peer{name: "mailpit", addr: smtp, goal: 3, version: version})
}

// freePort is a loopback address nobody listens on, for a server that
// cannot listen on port 0 and say where.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// startPlain runs a server that logs no "listening" line and waits until
// addr accepts connections.
func (b *bench) startPlain(name, bin string, args []string, addr string) (*proc, error) {
	p, err := b.start(name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited; see its log in %s", name, b.logs)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("%s did not listen on %s in 30s", name, addr)
}

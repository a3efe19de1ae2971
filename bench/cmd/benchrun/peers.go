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
	goal float64 // Mayfly's ratio to it that D 1/conn c=32 aims at (0: none)
	// goalMany is the ratio D 100/conn c=32 aims at (0: none).
	goalMany float64
	// version is the module version the binary was built from.
	version string
	proc    *proc
	// list is the URL of the peer's message list for one mailbox, given
	// its name (A's peer); nil when the peer has no list A compares with.
	list func(mailbox string) string
}

// startPeers starts every peer whose binary is in the tools dir: Mailpit,
// then Inbucket. Every listener is on loopback.
func (b *bench) startPeers() {
	if bin := b.tool("mailpit"); exists(bin) {
		smtp, web := freePort(), freePort()
		// Accept every recipient, keep the default 500-message store (pruned
		// as it fills, as in use), its database in the log dir.
		args := []string{"--smtp", smtp, "--listen", web, "--database", filepath.Join(b.logs, "mailpit.db"),
			"--smtp-disable-rdns", "--quiet"}
		b.startPeer(peer{name: "mailpit", addr: smtp, goal: 3}, bin, args, nil)
	}
	if bin := b.tool("inbucket"); exists(bin) {
		smtp, web, pop3 := freePort(), freePort(), freePort()
		// Its defaults otherwise: the in-memory store, 500 messages a
		// mailbox (pruned as it fills), every recipient accepted and
		// stored, a mailbox per local part. Warnings only in its log, as
		// Mailpit's --quiet.
		env := []string{"INBUCKET_SMTP_ADDR=" + smtp, "INBUCKET_WEB_ADDR=" + web, "INBUCKET_POP3_ADDR=" + pop3,
			"INBUCKET_STORAGE_TYPE=memory", "INBUCKET_LOGLEVEL=warn"}
		b.startPeer(peer{name: "inbucket", addr: smtp, goal: 0.75, goalMany: 0.6,
			list: func(mailbox string) string { return "http://" + web + "/api/v1/mailbox/" + mailbox }}, bin, nil, env)
	}
}

// goalFor is the ratio D at perConn messages per connection aims at.
func (p peer) goalFor(perConn int) float64 {
	if perConn == 1 {
		return p.goal
	}
	return p.goalMany
}

// peer is the running peer named name, or nil.
func (b *bench) peer(name string) *peer {
	for i := range b.peers {
		if b.peers[i].name == name {
			return &b.peers[i]
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (b *bench) startPeer(p peer, bin string, args, env []string) {
	if p.addr == "" {
		return
	}
	proc, err := b.startPlain(p.name, bin, args, env, p.addr)
	if err != nil {
		progress("%s not started: %v", p.name, err)
		return
	}
	p.proc = proc
	p.version = "?"
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		p.version = bi.Main.Path + " " + bi.Main.Version
	}
	b.peers = append(b.peers, p)
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
func (b *bench) startPlain(name, bin string, args, env []string, addr string) (*proc, error) {
	p, err := b.start(name, bin, args, env)
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

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// startProfile, with -profile, takes a CPU profile of p for d from its admin
// listener into <logs>/<name>.pprof and resets Redis's command stats; the
// returned func waits for it and writes the command stats to
// <logs>/<name>.commandstats.
func (b *bench) startProfile(st *stack, p *proc, name string, d time.Duration) func() {
	if !b.profile {
		return func() {}
	}
	for _, addr := range st.redis {
		h, port, _ := strings.Cut(addr, ":")
		exec.Command("redis-cli", "-h", h, "-p", port, "CONFIG", "RESETSTAT").Run()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addrs["admin"], int(d.Seconds()))
		resp, err := http.Get(url)
		if err != nil {
			progress("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(b.logs, name+".pprof"))
		if err != nil {
			return
		}
		io.Copy(f, resp.Body)
		f.Close()
	}()
	return func() {
		<-done
		var stats strings.Builder
		for _, addr := range st.redis {
			h, port, _ := strings.Cut(addr, ":")
			out, _ := exec.CommandContext(context.Background(), "redis-cli", "-h", h, "-p", port, "INFO", "commandstats").Output()
			fmt.Fprintf(&stats, "# %s\n%s\n", addr, out)
		}
		os.WriteFile(filepath.Join(b.logs, name+".commandstats"), []byte(stats.String()), 0o644)
		progress("profile of %s in %s", name, b.logs)
	}
}

// fetch saves p's admin path into <logs>/<name>.
func (b *bench) fetch(p *proc, path, name string) {
	resp, err := http.Get("http://" + p.addrs["admin"] + path)
	if err != nil {
		progress("fetch %s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	os.WriteFile(filepath.Join(b.logs, name), body, 0o644)
}

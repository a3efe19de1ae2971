package deploy

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

const runbookURL = "https://github.com/mayfly/mayfly/blob/main/deploy/RUNBOOKS.md#"

// ruleFiles are the alert rule files (not their tests).
func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("prometheus", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.yml") })
	if len(files) < 2 {
		t.Fatalf("rule files %v: want alerts.yml and redis-alerts.yml", files)
	}
	return files
}

// runbookBlock is a fenced block of RUNBOOKS.md.
type runbookBlock struct {
	section, info, text string
}

// readRunbooks returns RUNBOOKS.md's sections (## titles) and its blocks.
func readRunbooks(t *testing.T) (string, []string, []runbookBlock) {
	t.Helper()
	b, err := os.ReadFile("RUNBOOKS.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	var blocks []runbookBlock
	var cur *runbookBlock
	for line := range strings.Lines(string(b)) {
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			sections = append(sections, strings.TrimSpace(line[3:]))
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &runbookBlock{info: strings.TrimSpace(line[3:])}
			if len(sections) > 0 {
				cur.section = sections[len(sections)-1]
			}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line
		}
	}
	if cur != nil {
		t.Fatal("RUNBOOKS.md: a block is not closed")
	}
	return string(b), sections, blocks
}

// Every alert has a section of RUNBOOKS.md under its name, which its
// runbook_url links to, and every section is an alert's; the settings
// the runbooks name are Mayfly's.
func TestRunbooksCoverAlerts(t *testing.T) {
	text, sections, _ := readRunbooks(t)
	var alerts []string
	alertRE := regexp.MustCompile(`(?m)^\s+- alert: (\S+)\n(?:\s{8,}.*\n|\s*\n)*?\s+runbook_url: (\S+)`)
	for _, f := range ruleFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(alertRE.FindAllStringSubmatch(string(b), -1)), strings.Count(string(b), "- alert: "); got != want {
			t.Errorf("%s: %d of %d alerts have a runbook_url", f, got, want)
		}
		for _, m := range alertRE.FindAllStringSubmatch(string(b), -1) {
			alerts = append(alerts, m[1])
			if want := runbookURL + strings.ToLower(m[1]); m[2] != want {
				t.Errorf("%s: %s's runbook_url %s, want %s", f, m[1], m[2], want)
			}
		}
	}
	for _, a := range alerts {
		if !slices.Contains(sections, a) {
			t.Errorf("RUNBOOKS.md has no section ## %s", a)
		}
	}
	for _, s := range sections {
		if !slices.Contains(alerts, s) {
			t.Errorf("RUNBOOKS.md: section ## %s is no alert", s)
		}
	}
	readme, err := os.ReadFile("../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`MAYFLY_[A-Z0-9_]+`).FindAllString(text, -1) {
		if !strings.Contains(string(readme), "| `"+name+"` |") {
			t.Errorf("RUNBOOKS.md names %s, which is no setting of docs/settings.md", name)
		}
	}
}

// startNode builds cmd/mayfly and runs `mayfly all` on the Redis at addrs,
// on loopback ports; it returns the admin listener's URL once /readyz
// answers 200. The node gets SIGTERM at the test's end.
func startNode(t *testing.T, addrs []string) string {
	t.Helper()
	n := startNodeEnv(t, map[string]string{"MAYFLY_REDIS_ADDRS": strings.Join(addrs, ","),
		"MAYFLY_REDIS_PREFIX": "runbook:", "MAYFLY_COOKIE_SECURE": "false"})
	return "http://" + n.admin
}

// node is a `mayfly all` of startNodeEnv: its listeners' addresses.
type node struct{ admin, http, smtp string }

// startNodeEnv builds cmd/mayfly and runs `mayfly all` with env (its Redis,
// at least) on loopback ports, and returns once /readyz answers 200. The
// node gets SIGTERM at the test's end.
func startNodeEnv(t *testing.T, env map[string]string) node {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mayfly")
	if out, err := exec.Command(tool(t, "go"), "build", "-o", bin, "../cmd/mayfly").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	n := node{admin: freeAddr(t), http: freeAddr(t), smtp: freeAddr(t)}
	cmd := exec.Command(bin, "all")
	cmd.Env = append(os.Environ(), "MAYFLY_HTTP_ADDR="+n.http, "MAYFLY_SMTP_ADDR="+n.smtp,
		"MAYFLY_ADMIN_ADDR="+n.admin, "MAYFLY_DRAIN_DELAY=0s")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	url := "http://" + n.admin
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("mayfly all exited:\n%s", log.String())
		default:
		}
		if r, err := http.Get(url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return n
			}
		}
	}
	t.Fatalf("mayfly all not ready within 20 s:\n%s", log.String())
	return n
}

// The runbooks' `sh redis` and `sh node` blocks run as written, each under
// bash -euo pipefail, against a throwaway Redis Cluster with replicas
// (REDIS_HOST, REDIS_PORT: one of its nodes) and a `mayfly all` node on it
// (ADMIN): a misspelt command, a flag redis-cli lacks, a renamed metric or
// a grep that matches nothing fails here, not during an incident.
func TestRunbookCommands(t *testing.T) {
	tool(t, "redis-cli")
	tool(t, "curl")
	bash := tool(t, "bash")
	_, _, blocks := readRunbooks(t)
	var run []runbookBlock
	n := map[string]int{}
	for _, b := range blocks {
		if b.info == "sh redis" || b.info == "sh node" {
			run = append(run, b)
			n[b.info]++
		}
	}
	if n["sh redis"] < 5 || n["sh node"] < 4 {
		t.Fatalf("RUNBOOKS.md has %v blocks to run, want the runbooks' Redis and node checks", n)
	}
	c := storagetest.StartCluster(t, 3, 1)
	primary := c.PrimaryFor("runbook") // stays up: its replica is killed below
	host, port, _ := strings.Cut(primary, ":")
	env := append(os.Environ(), "REDIS_HOST="+host, "REDIS_PORT="+port, "ADMIN="+startNode(t, c.Addrs()))
	var redis []runbookBlock
	for _, b := range run {
		if b.info == "sh redis" {
			redis = append(redis, b)
		}
		cmd := exec.Command(bash, "-euo", "pipefail", "-c", b.text)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) == 0 {
			t.Errorf("## %s: block\n%s\n%v, output:\n%s", b.section, b.text, err, out)
			continue
		}
		t.Logf("## %s (%s):\n%s", b.section, b.info, out)
	}

	// The check for a primary without a replica names it once its only
	// replica has failed.
	var without runbookBlock
	for _, b := range redis {
		if b.section == "MayflyDurableWritesWithoutWait" {
			without = b
		}
	}
	c.Kill(c.ReplicaOf(primary))
	want := primary + " 0 replica(s)"
	var out []byte
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cmd := exec.Command(bash, "-euo", "pipefail", "-c", without.text)
		cmd.Env = env
		if out, _ = cmd.CombinedOutput(); strings.Contains(string(out), want+"\n") {
			return
		}
	}
	t.Errorf("## MayflyDurableWritesWithoutWait with %s's replica killed: no line %q in\n%s", primary, want, out)
}

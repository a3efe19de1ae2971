package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage/storagetest"
)

// A misspelt setting stops the node before it binds a port, naming the
// setting meant; every unknown name is listed.
func TestUnknownSettingStopsTheNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"MAYFLY_TRUSTED_PROXY": "10.0.0.0/8"},
			[]string{"MAYFLY_TRUSTED_PROXY is not a setting: did you mean MAYFLY_TRUSTED_PROXIES?"}},
		{map[string]string{"MAYFLY_SMTP_BUFER_BYTES_PER_IP": "1", "MAYFLY_redis_addrs": "x:1"},
			[]string{"MAYFLY_SMTP_BUFER_BYTES_PER_IP is not a setting: did you mean MAYFLY_SMTP_BUFFER_BYTES_PER_IP?",
				"MAYFLY_redis_addrs is not a setting: did you mean MAYFLY_REDIS_ADDRS?"}},
		{map[string]string{"MAYFLY_FROBNICATE_EVERYTHING": "yes"},
			[]string{"MAYFLY_FROBNICATE_EVERYTHING is not a setting (mayfly settings lists them"}},
	}
	for _, tc := range tests {
		env := testEnv(t, tc.env)
		env["MAYFLY_ADMIN_ADDR"] = "127.0.0.1:0"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var logs strings.Builder
		err := run(ctx, []string{"all"}, environ(env), io.Discard, &logs)
		cancel()
		if err == nil {
			t.Fatalf("run with %v succeeded", tc.env)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("run error = %q, want %q", err, want)
			}
		}
		if strings.Contains(logs.String(), "listening") {
			t.Errorf("the node listened before refusing:\n%s", logs.String())
		}
	}
}

// A node starts with the environment the project's own scripts give it:
// this test process's (make test exports MAYFLY_TEST_* and
// MAYFLY_CLUSTER_DIR), deploy/dev.env's lines (make run; its MAYFLY_LB_*
// are haproxy's) and every name the scripts, drills and clients read.
func TestNodeIgnoresTheProjectsOtherNames(t *testing.T) {
	t.Parallel()
	env := append(os.Environ(), devEnvLines(t)...)
	for _, name := range []string{"MAYFLY_URL", "MAYFLY_INBOX", "MAYFLY_TIMEOUT", "MAYFLY_LIFETIME",
		"MAYFLY_WAIT_FOR_CAPACITY", "MAYFLY_SMTP", "MAYFLY_SUITE", "MAYFLY_SUITE_TESTS", "MAYFLY_BIN",
		"MAYFLY_DRILL", "MAYFLY_DRILL_PARTITION_RUNS", "MAYFLY_RUN_MODE", "MAYFLY_RUN_PROFILE",
		"MAYFLY_EDGE1_HTTP", "MAYFLY_INGEST2_ADMIN", "MAYFLY_TOPOLOGY_DIR", "MAYFLY_HAPROXY_CFG",
		"MAYFLY_PORT_LOW", "MAYFLY_FUZZTIME", "MAYFLY_SKIP_FUZZ", "MAYFLY_TEST_TLS", "MAYFLY_CLUSTER_REPLICAS",
		// Kubernetes' service links for Services named mayfly-edge and mayfly
		"MAYFLY_EDGE_SERVICE_HOST", "MAYFLY_EDGE_PORT_8080_TCP_ADDR", "MAYFLY_SERVICE_HOST", "MAYFLY_SERVICE_PORT_HTTP",
		"MAYFLY_PORT", "MAYFLY_PORT_9090_TCP", "MAYFLY_PORT_2525_TCP_PROTO"} {
		env = append(env, name+"=1")
	}
	// testEnv's settings come first: the first mention of a name wins.
	node := testEnv(t, map[string]string{"MAYFLY_REDIS_PREFIX": storagetest.Prefix(t),
		"MAYFLY_HTTP_ADDR": "127.0.0.1:0", "MAYFLY_SMTP_ADDR": "127.0.0.1:0", "MAYFLY_ADMIN_ADDR": "127.0.0.1:0"})
	env = append(environ(node), env...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"all"}, env, io.Discard, logw)
		logw.CloseWithError(err)
		done <- err
	}()
	listeningAddrs(t, logs, "http", "smtp", "admin")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// devEnvLines are deploy/dev.env's NAME=value lines.
func devEnvLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../deploy/dev.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// Every MAYFLY_* name the repository spells is a setting or one of
// notNodeSettings: a script, drill or client that reads a new name must list
// it, or the nodes it starts beside it would refuse to start.
func TestEveryMayflyNameIsKnown(t *testing.T) {
	t.Parallel()
	// Names written wrong on purpose, by the tests and docs of the refusal.
	misspelt := []string{"MAYFLY_TRUSTED_PROXY", "MAYFLY_SMTP_BUFER_BYTES_PER_IP", "MAYFLY_FROBNICATE_EVERYTHING"}
	name := regexp.MustCompile(`MAYFLY_[A-Z0-9_]*[A-Z0-9]\b`)
	found := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "third_party", "bin", "dist", ".venv", "__pycache__":
				return filepath.SkipDir
			}
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil || len(raw) > 4<<20 {
			return err
		}
		for _, m := range name.FindAllString(string(raw), -1) {
			found[m] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range slices.Sorted(maps.Keys(found)) {
		// A name that ends in _ in the text (MAYFLY_REDIS_*) is a prefix in prose.
		if isSetting(n) || notNodeSetting(n) || slices.Contains(misspelt, n) {
			continue
		}
		t.Errorf("%s (in %s) is neither a setting nor in notNodeSettings: a node started beside it refuses to start", n, found[n])
	}
}

// `mayfly settings` prints every setting with its value, default and
// source, masks the password, and returns what would stop a node.
func TestSettingsCommand(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := run(context.Background(), []string{"settings"}, []string{
		"MAYFLY_REDIS_PASSWORD=hunter2 secret", "MAYFLY_SMTP_MAX_BYTES=1000", "MAYFLY_URL=http://x/v1",
	}, &out, io.Discard)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	rows := settingsRows(t, out.String())
	for name, want := range map[string][3]string{
		"MAYFLY_REDIS_PASSWORD":  {redacted, "(empty)", "env"},
		"MAYFLY_SMTP_MAX_BYTES":  {"1000", "10485760", "env"},
		"MAYFLY_REDIS_ADDRS":     {"127.0.0.1:6379", "127.0.0.1:6379", "default"},
		"MAYFLY_TRUSTED_PROXIES": {"(empty)", "(empty)", "default"},
	} {
		if got := rows[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(rows) != len(settings) {
		t.Errorf("%d rows, want one per setting (%d)", len(rows), len(settings))
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("the password is printed:\n%s", out.String())
	}
	out.Reset()
	err = run(context.Background(), []string{"settings"}, []string{"MAYFLY_TRUSTED_PROXY=10.0.0.0/8", "MAYFLY_SMTP_MAX_BYTES=-1"}, &out, io.Discard)
	for _, want := range []string{"did you mean MAYFLY_TRUSTED_PROXIES?", "MAYFLY_SMTP_MAX_BYTES: must be a positive integer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("settings error = %v, want %q", err, want)
		}
	}
}

// settingsRows parses `mayfly settings` output: name → value, default,
// source (no value of the tests holds a run of two spaces).
func settingsRows(t *testing.T, out string) map[string][3]string {
	t.Helper()
	rows := map[string][3]string{}
	cell := regexp.MustCompile(`\s{2,}`)
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := cell.Split(strings.TrimSpace(line), -1)
		if i == 0 {
			if got := strings.Join(f, " "); got != "NAME VALUE DEFAULT SOURCE" {
				t.Fatalf("header = %q", got)
			}
			continue
		}
		if len(f) != 4 {
			t.Fatalf("row %q has %d cells", line, len(f))
		}
		rows[f[0]] = [3]string{f[1], f[2], f[3]}
	}
	return rows
}

// runUntilListening runs a node of env on :0 ports until it listens with
// every kind, stops it and returns its log lines.
func runUntilListening(t *testing.T, cmd string, env map[string]string, kinds ...string) []map[string]any {
	t.Helper()
	env = maps.Clone(env)
	maps.Copy(env, map[string]string{"MAYFLY_HTTP_ADDR": "127.0.0.1:0", "MAYFLY_SMTP_ADDR": "127.0.0.1:0", "MAYFLY_ADMIN_ADDR": "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, logw := io.Pipe()
	var logged bytes.Buffer // read once run returned
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{cmd}, environ(env), io.Discard, io.MultiWriter(logw, &logged))
		logw.CloseWithError(err)
		done <- err
	}()
	listeningAddrs(t, logs, kinds...)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	var lines []map[string]any
	for _, raw := range bytes.Split(logged.Bytes(), []byte("\n")) {
		var line map[string]any
		if json.Unmarshal(raw, &line) == nil {
			lines = append(lines, line)
		}
	}
	return lines
}

// A setting the node does not apply as configured is logged with both
// values, once per setting.
func TestClampsAreLogged(t *testing.T) {
	t.Parallel()
	lines := runUntilListening(t, "all", testEnv(t, map[string]string{
		"MAYFLY_REDIS_PREFIX":             storagetest.Prefix(t),
		"MAYFLY_SMTP_BUFFER_BYTES":        "1000",
		"MAYFLY_SMTP_BUFFER_BYTES_PER_IP": "500",
		"MAYFLY_RATE_NET_ACTIVE":          "1",
		"MAYFLY_RATE_NET_CREATE_PER_DAY":  "7",
		"MAYFLY_HTTP_MAX_CONNS":           "1000000000",
	}), "http", "smtp", "admin")
	got := map[string]string{}
	for _, l := range lines {
		if l["msg"] == "setting clamped" {
			got[fmt.Sprint(l["setting"])] = fmt.Sprintf("%v→%v", l["configured"], l["applied"])
		}
	}
	budget := "?"
	for _, l := range lines {
		if l["msg"] == "file descriptor limit" {
			budget = fmt.Sprint(l["http_conn_budget"])
		}
	}
	want := map[string]string{
		"MAYFLY_SMTP_BUFFER_BYTES":        "1000→1.048576e+07",
		"MAYFLY_SMTP_BUFFER_BYTES_PER_IP": "500→1.048576e+07",
		"MAYFLY_RATE_NET_ACTIVE":          "1→5",
		"MAYFLY_RATE_NET_CREATE_PER_DAY":  "7→20",
		"MAYFLY_HTTP_MAX_CONNS":           "1e+09→" + budget,
	}
	if !maps.Equal(got, want) {
		t.Errorf("clamps logged = %v, want %v", got, want)
	}
}

// Package deploy holds the artifacts operators run Mayfly with; its tests
// check each one with a tool that understands it. The tools come from
// deploy/install-deps.sh (packages systemd and prometheus); a missing tool is
// a failure, never a skip.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run deploy/install-deps.sh", name)
	}
	return p
}

// The units must pass `systemd-analyze verify` without a single warning
// (it exits 0 on unknown keys and bad values, so any output fails). It needs
// the ExecStart binary and the EnvironmentFile to exist: both point into a
// temp dir here.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	dir := t.TempDir()
	bin := filepath.Join(dir, "mayfly")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var units []string
	for _, kind := range []string{"edge", "ingest"} {
		unit, err := os.ReadFile(filepath.Join("systemd", "mayfly-"+kind+".service"))
		if err != nil {
			t.Fatal(err)
		}
		text := string(unit)
		for _, want := range []string{"DynamicUser=yes", "Restart=on-failure", "EnvironmentFile=/etc/mayfly/" + kind + ".env",
			"ExecStart=/usr/local/bin/mayfly " + kind, "NoNewPrivileges=yes", "ProtectSystem=strict",
			// The Redis password is a credential file, never an environment value.
			"LoadCredential=redis-password:/etc/mayfly/redis-password",
			"Environment=MAYFLY_REDIS_PASSWORD_FILE=%d/redis-password"} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("mayfly-%s.service lacks %q", kind, want)
			}
		}
		text = strings.ReplaceAll(text, "/usr/local/bin/mayfly", bin)
		text = strings.ReplaceAll(text, "/etc/mayfly/", dir+"/")
		env, err := os.ReadFile(filepath.Join("systemd", kind+".env.example"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(env), "MAYFLY_REDIS_PASSWORD=") {
			t.Errorf("%s.env.example sets MAYFLY_REDIS_PASSWORD: the password belongs in the credential file", kind)
		}
		if err := os.WriteFile(filepath.Join(dir, kind+".env"), env, 0o600); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "mayfly-"+kind+".service")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The alert rules parse, and their unit tests (alerts_test.yml) pass.
func TestPrometheusRules(t *testing.T) {
	promtool := tool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every series the alert rules read is one Mayfly exports: a renamed metric
// must not silently disable an alert.
func TestPrometheusRulesUseExportedSeries(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, f := range []string{"../edge/metrics.go", "../ingest/metrics.go", "../cmd/mayfly/redisconfig.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	for _, word := range strings.FieldsFunc(string(rules), func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if strings.HasPrefix(word, "mayfly_") && !strings.Contains(code.String(), `"`+word+`"`) {
			t.Errorf("alerts.yml reads %s, which no node exports", word)
		}
	}
}

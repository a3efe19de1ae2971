package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readDoc returns a page of the repository's documentation, by its path
// from the repository's root (docs/settings.md).
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSettingsDocListsEverySetting keeps docs/settings.md's table and the
// one settings table of the code in step, as `mayfly settings` prints it:
// every variable with its default.
func TestSettingsDocListsEverySetting(t *testing.T) {
	readme := readDoc(t, "docs/settings.md")
	rows := map[string]string{}
	for _, line := range strings.Split(readme, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`MAYFLY_") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	var out strings.Builder
	if err := run(context.Background(), []string{"settings"}, nil, &out, io.Discard); err != nil {
		t.Fatalf("mayfly settings: %v", err)
	}
	printed := settingsRows(t, out.String())
	if len(printed) != len(settings) {
		t.Errorf("mayfly settings prints %d settings, the table holds %d", len(printed), len(settings))
	}
	for env, cells := range printed {
		def, ok := rows[env]
		if !ok {
			t.Errorf("docs/settings.md: the table lacks %s", env)
			continue
		}
		want := "`" + cells[1] + "`"
		if cells[1] == "(empty)" {
			want = "(empty)"
		}
		if def != want {
			t.Errorf("docs/settings.md: the default of %s = %s, want %s", env, def, want)
		}
		delete(rows, env)
	}
	for env := range rows {
		t.Errorf("docs/settings.md lists %s, which the code does not read", env)
	}
}

// TestTestingDocGoTestRuns runs docs/testing.md's minimal Go test (the block that
// starts "package signup_test") as written, in a module of its own that
// takes the client from this repository, against a real stack; signUp, the
// application it leaves to the reader, mails a code over SMTP.
func TestTestingDocGoTestRuns(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "docs/testing.md")
	_, block, ok := strings.Cut(readme, "```go\npackage signup_test\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/testing.md has no Go block starting with package signup_test")
	}
	clientDir, err := filepath.Abs("../../clients/go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod": "module example.com/signup\n\ngo 1.23\n\nrequire github.com/mayfly/mayfly/clients/go v0.0.0\n\n" +
			"replace github.com/mayfly/mayfly/clients/go => " + clientDir + "\n",
		"signup_test.go": "package signup_test\n" + block,
		"app_test.go": `package signup_test

import (
	"net/smtp"
	"os"
	"testing"
)

func signUp(t *testing.T, addr string) {
	err := smtp.SendMail(os.Getenv("SMTP_ADDR"), nil, "shop@example.com", []string{addr},
		[]byte("Subject: Your code\r\n\r\nOrder #2026 placed 2026-11-24. Your code is 482913.\r\n"))
	if err != nil {
		t.Fatal(err)
	}
}
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	api, smtpAddr, _ := service(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MAYFLY_URL="+api, "SMTP_ADDR="+smtpAddr, "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSignup") {
		t.Fatalf("docs/testing.md's Go test: %v\n%s", err, out)
	}
}

// TestUsageNamesDocs: every page `mayfly --help` points at exists.
func TestUsageNamesDocs(t *testing.T) {
	pages := regexp.MustCompile(`docs/[a-z]+\.md`).FindAllString(usage, -1)
	if len(pages) < 5 {
		t.Fatalf("usage names %d pages of docs/: %q", len(pages), pages)
	}
	for _, page := range pages {
		if _, err := os.Stat(filepath.Join("../..", page)); err != nil {
			t.Errorf("usage names %s: %v", page, err)
		}
	}
}

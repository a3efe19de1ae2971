package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// versionLines are the lines `mayfly version` prints for a build.
func versionLines(b build) []string {
	return []string{
		"mayfly " + b.version,
		"revision: " + b.revision,
		"go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"write layout: " + storage.LayoutCurrent + " on a fresh cluster (else MAYFLY_STORAGE_WRITE_LAYOUT or the fleet's)",
		"read layouts: " + strings.Join(storage.Layouts, ", "),
	}
}

// TestVersionStamped builds bin/mayfly as `make build` does (into a temp
// dir) and runs `mayfly version`: it names the commit's git describe and
// its full hash, which the Makefile's -ldflags stamped.
func TestVersionStamped(t *testing.T) {
	t.Parallel()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	bin := filepath.Join(t.TempDir(), "mayfly")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "make", "-s", "--no-print-directory", "-C", "../..", "build", "OUT="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	// After the build: a tree made dirty meanwhile would give make's -dirty.
	want := versionLines(build{
		version:  git("describe", "--tags", "--always", "--dirty", "--match", "v[0-9]*"),
		revision: git("rev-parse", "HEAD"),
	})
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("mayfly version: %v", err)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mayfly version printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The Makefile's fallbacks without git: a VERSION file's first line, else
// "dev"; no revision (the binary then says what the toolchain recorded).
func TestMakefileVersionWithoutGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), makefile, 0o600); err != nil {
		t.Fatal(err)
	}
	dryRun := func() string {
		t.Helper()
		cmd := exec.Command("make", "-s", "-n", "--no-print-directory", "build")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "GIT_DIR="+filepath.Join(dir, "no-git"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n build: %v", err)
		}
		return string(out)
	}
	if got, want := dryRun(), "-X main.version=dev -X main.revision='"; !strings.Contains(got, want) {
		t.Errorf("without git or VERSION: make build runs %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("v2026.11.26\nanything else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := dryRun(), "-X main.version=v2026.11.26 -X main.revision='"; !strings.Contains(got, want) {
		t.Errorf("with a VERSION file: make build runs %q, want %q", got, want)
	}
}

// A build without the linker's values (go build, go test) still prints
// every line, naming what it does not know.
func TestVersionUnstamped(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b := readBuild()
	if b.version == "" || b.revision == "" {
		t.Errorf("readBuild() = %+v: want a version and a revision, if only (devel) and unknown", b)
	}
	if got, want := strings.TrimSpace(out.String()), strings.Join(versionLines(b), "\n"); got != want {
		t.Errorf("mayfly version printed\n%s\nwant\n%s", got, want)
	}
}

// TestChangelogLayouts: every section of CHANGELOG.md says which storage
// layout it writes and reads, and every layout this release knows is named
// by one of them (a new layout is a changelog line).
func TestChangelogLayouts(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := regexp.MustCompile(`(?m)^## `).Split(string(b), -1)[1:]
	if len(sections) < 3 || !strings.HasPrefix(sections[0], "Unreleased\n") {
		t.Fatalf("CHANGELOG.md: %d sections, want Unreleased first, then the releases", len(sections))
	}
	var layoutLines string
	for _, s := range sections {
		heading, _, _ := strings.Cut(s, "\n")
		_, rest, ok := strings.Cut(s, "\nStorage layout: ")
		if !ok {
			t.Errorf("CHANGELOG.md section %q has no \"Storage layout:\" line", heading)
			continue
		}
		para, _, _ := strings.Cut(rest, "\n\n")
		layoutLines += para + "\n"
	}
	for _, l := range storage.Layouts {
		if !strings.Contains(layoutLines, l) {
			t.Errorf("no Storage layout line of CHANGELOG.md names layout %s", l)
		}
	}
}

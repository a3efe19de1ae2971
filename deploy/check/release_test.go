package check

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// ldflagsX is the -X assignments (name → value) of the -ldflags in a
// command line, split into words as the shell would after expanding env.
func ldflagsX(t *testing.T, cmdline string, env []string) map[string]string {
	t.Helper()
	words, err := shell.NewLex('\\').ProcessWords(cmdline, shell.EnvsFromSlice(env))
	if err != nil {
		t.Fatalf("%s: %v", cmdline, err)
	}
	var flags string
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, "-ldflags="); ok {
			flags = v
		} else if w == "-ldflags" && i+1 < len(words) {
			flags = words[i+1]
		}
	}
	out := map[string]string{}
	fields := strings.Fields(flags)
	for i, f := range fields {
		if f == "-X" && i+1 < len(fields) {
			k, v, _ := strings.Cut(fields[i+1], "=")
			out[k] = v
		}
	}
	return out
}

// TestDockerfileStampsTheVersion: the build args VERSION and REVISION reach
// the go build's -ldflags as the same -X flags `make build` passes (which
// cmd/mayfly's TestVersionStamped proves the binary prints), and `make
// image` passes them as build args.
func TestDockerfileStampsTheVersion(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	given := map[string]string{"VERSION": "v2099.01.02", "REVISION": "0123456789abcdef0123456789abcdef01234567"}
	var docker map[string]string
	// A RUN sees only the build args its stage declared before it.
	var env []string
	for _, c := range stages[0].Commands {
		switch v := c.(type) {
		case *instructions.ArgCommand:
			for _, a := range v.Args {
				if val, ok := given[a.Key]; ok {
					env = append(env, a.Key+"="+val)
				}
			}
		case *instructions.RunCommand:
			line := strings.Join(v.CmdLine, " ")
			if strings.Contains(line, "go build") && strings.Contains(line, "./cmd/mayfly") {
				docker = ldflagsX(t, line, env)
			}
		}
	}
	if docker == nil {
		t.Fatal("the build stage has no RUN go build … ./cmd/mayfly")
	}
	out, err := exec.Command("make", "-s", "-n", "--no-print-directory", "-C", repo, "build", "image",
		"VERSION="+given["VERSION"], "REVISION="+given["REVISION"]).Output()
	if err != nil {
		t.Fatalf("make -n build image: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("make -n build image printed %q, want two commands", lines)
	}
	makeX := ldflagsX(t, lines[0], nil)
	if len(makeX) != 2 || !slices.Contains(slices.Collect(maps.Values(makeX)), given["VERSION"]) ||
		!slices.Contains(slices.Collect(maps.Values(makeX)), given["REVISION"]) {
		t.Fatalf("make build's -X flags %v do not carry VERSION and REVISION (%s)", makeX, lines[0])
	}
	if !maps.Equal(docker, makeX) {
		t.Errorf("with the build args %v the Dockerfile's go build stamps -X %v, make build -X %v: want the same", given, docker, makeX)
	}
	for _, arg := range []string{"--build-arg VERSION=" + given["VERSION"], "--build-arg REVISION=" + given["REVISION"], "-t mayfly:2099.01.02 "} {
		if !strings.Contains(lines[1]+" ", arg) {
			t.Errorf("make image runs %q, which lacks %q", lines[1], arg)
		}
	}
}

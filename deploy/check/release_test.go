package check

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// splitImage splits a container image reference into its name (registry
// and path), tag and digest. The tag follows the last colon after the last
// slash: a colon before it is a registry's port (localhost:5000/mayfly).
func splitImage(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// resolveImage is the image a container runs once kustomize's images
// apply: the entry named as the image's name gives it a new name, tag or
// digest (a digest replaces the tag).
func resolveImage(image string, changes []imageChange) string {
	name, tag, digest := splitImage(image)
	for _, c := range changes {
		if c.Name != name {
			continue
		}
		if c.NewName != "" {
			name = c.NewName
		}
		if c.NewTag != "" {
			tag = c.NewTag
		}
		if c.Digest != "" {
			tag, digest = "", c.Digest
		}
		break
	}
	ref := name
	if tag != "" {
		ref += ":" + tag
	}
	if digest != "" {
		ref += "@" + digest
	}
	return ref
}

// pinnedImage is nil when ref names one build: a tag other than latest, or
// a digest. Without a tag a runtime pulls latest, which names whatever was
// pushed last: the pods of one Deployment could run different builds, and a
// rescheduled pod another release than its neighbours.
func pinnedImage(ref string) error {
	_, tag, digest := splitImage(ref)
	switch {
	case digest != "":
		return nil
	case tag == "":
		return fmt.Errorf("image %q has no tag, which pulls :latest: pin a release tag (mayfly:2026.11.26, CHANGELOG.md) or a digest", ref)
	case tag == "latest":
		return fmt.Errorf("image %q is :latest, which names no release: pin a release tag (mayfly:2026.11.26, CHANGELOG.md) or a digest", ref)
	}
	return nil
}

// pinnedImages checks the image of every container of every Deployment as
// kustomize renders it (after the kustomization's images).
func pinnedImages(o objects) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(o.deployments)) {
		spec := o.deployments[name].Spec.Template.Spec
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			if err := pinnedImage(resolveImage(c.Image, o.images)); err != nil {
				errs = append(errs, fmt.Errorf("Deployment %s, container %s: %w", name, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func TestImageReferences(t *testing.T) {
	t.Parallel()
	pin := []imageChange{{Name: "mayfly", NewName: "ghcr.io/mayfly/mayfly", NewTag: "2026.11.26"}}
	for _, tt := range []struct {
		image   string
		changes []imageChange
		want    string // resolved
		refused string // in the error; "" when pinned
	}{
		{"mayfly", pin, "ghcr.io/mayfly/mayfly:2026.11.26", ""},
		{"mayfly:latest", pin, "ghcr.io/mayfly/mayfly:2026.11.26", ""},
		{"mayfly", nil, "mayfly", "no tag"},
		{"mayfly:latest", nil, "mayfly:latest", ":latest"},
		{"ghcr.io/mayfly/mayfly:latest", pin, "ghcr.io/mayfly/mayfly:latest", ":latest"},
		{"mayfly", []imageChange{{Name: "mayfly", NewTag: "latest"}}, "mayfly:latest", ":latest"},
		{"mayfly", []imageChange{{Name: "mayfly", NewName: "ghcr.io/mayfly/mayfly"}}, "ghcr.io/mayfly/mayfly", "no tag"},
		{"localhost:5000/mayfly", nil, "localhost:5000/mayfly", "no tag"},
		{"localhost:5000/mayfly:2026.11.26", nil, "localhost:5000/mayfly:2026.11.26", ""},
		{"mayfly@sha256:0123", nil, "mayfly@sha256:0123", ""},
		{"mayfly", []imageChange{{Name: "mayfly", NewTag: "latest", Digest: "sha256:0123"}}, "mayfly@sha256:0123", ""},
		{"other", pin, "other", "no tag"},
	} {
		got := resolveImage(tt.image, tt.changes)
		if got != tt.want {
			t.Errorf("resolveImage(%q, %v) = %q, want %q", tt.image, tt.changes, got, tt.want)
		}
		err := pinnedImage(got)
		if tt.refused == "" && err != nil || tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)) {
			t.Errorf("pinnedImage(%q) = %v, want %s", got, err, wantOf(tt.refused))
		}
	}
}

// wantOf names what a case wants of pinnedImage.
func wantOf(refused string) string {
	if refused == "" {
		return "pinned"
	}
	return "refused: " + refused
}

// The base pins a release; a copy of it whose kustomization says latest,
// or has no images entry (the Deployments' own image has no tag), is
// refused, naming each Deployment.
func TestKubernetesImagesPinned(t *testing.T) {
	t.Parallel()
	if err := pinnedImages(load(t, base)); err != nil {
		t.Fatalf("the base: %v", err)
	}
	kustomization, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tagLine := regexp.MustCompile(`(?m)^(\s*newTag:).*$`)
	for name, edit := range map[string]func([]byte) []byte{
		"latest": func(b []byte) []byte { return tagLine.ReplaceAll(b, []byte("${1} latest")) },
		"no tag": func(b []byte) []byte { return tagLine.ReplaceAll(b, nil) },
		"no images entry": func(b []byte) []byte {
			before, _, _ := strings.Cut(string(b), "\nimages:")
			return []byte(before + "\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			entries, err := os.ReadDir(base)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(base, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() == "kustomization.yaml" {
					b = edit(kustomization)
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err = pinnedImages(load(t, dir))
			if err == nil {
				t.Fatal("pinnedImages passed an image that is not pinned")
			}
			for _, want := range []string{"Deployment mayfly-edge", "Deployment mayfly-ingest", "pin a release tag"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			t.Log(err)
		})
	}
}

// releases are the versions of CHANGELOG.md's release sections, newest
// first ("## v2026.11.26 (…)").
func releases(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^## (v\d{4}\.\d{2}\.\d{2}) `).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("CHANGELOG.md has no release section (## vYYYY.MM.DD …)")
	}
	return out
}

// The base deploys the newest release of CHANGELOG.md: cutting a release
// moves the pin with it, and a pin names a release that exists.
func TestKubernetesBasePinsTheNewestRelease(t *testing.T) {
	t.Parallel()
	newest := releases(t)[0]
	o := load(t, base)
	for name, d := range o.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			_, tag, _ := splitImage(resolveImage(c.Image, o.images))
			if got, want := tag, strings.TrimPrefix(newest, "v"); got != want {
				t.Errorf("Deployment %s runs tag %q, want %q: CHANGELOG.md's newest release is %s", name, got, want, newest)
			}
		}
	}
}

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

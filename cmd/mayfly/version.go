package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mayfly/mayfly/storage"
)

// version and revision name the build. The linker sets them: `make build`
// and the Dockerfile pass -X main.version=… -X main.revision=… (the
// Makefile's LDFLAGS). A plain `go build` leaves them empty, and readBuild
// falls back to what the Go toolchain recorded.
var (
	version  string
	revision string
)

// build is what `mayfly version` prints and mayfly_build_info labels.
type build struct {
	version   string // a release tag (v2026.11.26), git describe past one, "dev", or the toolchain's module version
	revision  string // the full commit hash; "-dirty" when the toolchain saw uncommitted changes; "unknown"
	goVersion string
}

// readBuild is the build of this binary: the linker's values, else the
// module version and VCS revision from the build info (which `go build`
// records in a checkout unless -buildvcs=false; never in a test binary).
func readBuild() build {
	b := build{version: version, revision: revision, goVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.version == "" {
			b.version = bi.Main.Version
		}
		if b.revision == "" {
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					b.revision = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if b.revision != "" && dirty {
				b.revision += "-dirty"
			}
		}
	}
	if b.version == "" {
		b.version = "(devel)"
	}
	if b.revision == "" {
		b.revision = "unknown"
	}
	return b
}

// printVersion writes `mayfly version`: the first line as before ("mayfly
// <version>"), then one "name: value" line each. Without Redis it can only
// say which layouts the binary reads and which it writes on a fresh
// cluster; a running node writes what MAYFLY_STORAGE_WRITE_LAYOUT or the
// fleet's layout guard says, mayfly_build_info's layout label.
func printVersion(w io.Writer, b build) {
	fmt.Fprintf(w, "mayfly %s\n", b.version)
	fmt.Fprintf(w, "revision: %s\n", b.revision)
	fmt.Fprintf(w, "go: %s %s/%s\n", b.goVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "write layout: %s on a fresh cluster (else MAYFLY_STORAGE_WRITE_LAYOUT or the fleet's)\n", storage.LayoutCurrent)
	fmt.Fprintf(w, "read layouts: %s\n", strings.Join(storage.Layouts, ", "))
}

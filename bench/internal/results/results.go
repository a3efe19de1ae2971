// Package results keeps bench/RESULTS.md as one marked section per scenario,
// each replaced by the next run that measures it, so that the file holds the
// latest figures of every scenario and never grows by a run:
//
//	<!-- section: scale -->
//	## Scale: …
//	<!-- /section -->
//
// Text outside the markers (the title) is kept as it is. What the figures of
// earlier runs showed is bench/HISTORY.md's, written by people, not by this
// package.
package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Title starts a results file that does not exist yet.
const Title = "# Mayfly benchmark results\n\n" +
	"Each section is the latest run of its scenario, written by `make bench` or `make bench-scale`\n" +
	"and replaced by the next run of it. How the benchmarks work: [README.md](README.md); what\n" +
	"earlier runs found: [HISTORY.md](HISTORY.md).\n"

// Section is one scenario's results: Name is its marker's name, Body its
// Markdown.
type Section struct {
	Name, Body string
}

// ErrMarkers is returned for a document whose markers do not pair up.
var ErrMarkers = errors.New("results: unpaired section markers")

var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

const end = "<!-- /section -->"

func begin(name string) string { return "<!-- section: " + name + " -->" }

// Replace returns doc with each section's marked block replaced by its body,
// or appended when doc has no block of that name. A section marker without
// its end, or twice, is ErrMarkers: the file was edited by hand, and
// guessing where a section ends would lose text.
func Replace(doc string, sections ...Section) (string, error) {
	for _, s := range sections {
		if !name.MatchString(s.Name) {
			return "", fmt.Errorf("results: section name %q", s.Name)
		}
		block := begin(s.Name) + "\n\n" + strings.Trim(s.Body, "\n") + "\n\n" + end + "\n"
		start := lineIndex(doc, begin(s.Name), 0)
		if start < 0 {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + block
			continue
		}
		if lineIndex(doc, begin(s.Name), start+1) >= 0 {
			return "", fmt.Errorf("%w: %q twice", ErrMarkers, s.Name)
		}
		stop := lineIndex(doc, end, start)
		if next := lineIndex(doc, "<!-- section: ", start+1); stop < 0 || (next >= 0 && next < stop) {
			return "", fmt.Errorf("%w: %q has no end", ErrMarkers, s.Name)
		}
		doc = doc[:start] + block + strings.TrimPrefix(doc[stop+len(end):], "\n")
	}
	return doc, nil
}

// lineIndex is the offset of the first line at or after from that starts
// with prefix, or -1.
func lineIndex(doc, prefix string, from int) int {
	for i := from; i < len(doc); {
		if (i == 0 || doc[i-1] == '\n') && strings.HasPrefix(doc[i:], prefix) {
			return i
		}
		nl := strings.IndexByte(doc[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	return -1
}

// ReplaceFile replaces the sections in the file at path (starting it with
// Title when it does not exist) and writes it back through a temporary file
// in the same directory, so a run that dies mid-write leaves the old file.
func ReplaceFile(path string, sections ...Section) error {
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		old, err = []byte(Title), nil
	}
	if err != nil {
		return err
	}
	doc, err := Replace(string(old), sections...)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".results-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(doc); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

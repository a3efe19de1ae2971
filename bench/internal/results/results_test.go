package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	doc := "# Title\n\nintro\n"
	doc, err := Replace(doc, Section{"A", "## A\n\nfirst\n"}, Section{"scale", "## Scale\n\n1\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nintro\n\n<!-- section: A -->\n\n## A\n\nfirst\n\n<!-- /section -->\n\n<!-- section: scale -->\n\n## Scale\n\n1\n\n<!-- /section -->\n"
	if doc != want {
		t.Fatalf("append:\n%s\nwant:\n%s", doc, want)
	}
	// A second run replaces its section in place, whatever its length, and
	// leaves the others and the text around them alone.
	got, err := Replace(doc, Section{"A", "\n## A\n\nsecond\nand more\n\n\n"})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(want, "## A\n\nfirst\n", "## A\n\nsecond\nand more\n", 1)
	if got != want {
		t.Fatalf("replace:\n%s\nwant:\n%s", got, want)
	}
	// Replacing again with the same body changes nothing: the file does not
	// grow by a run.
	again, err := Replace(got, Section{"A", "## A\n\nsecond\nand more\n"})
	if err != nil || again != got {
		t.Fatalf("same body again: err %v, changed:\n%s", err, again)
	}
	// A name that is a prefix of another's is its own section.
	got, err = Replace(want, Section{"scale-memory", "m"}, Section{"scale", "## Scale\n\n2\n"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "## Scale\n\n2\n") || strings.Contains(got, "## Scale\n\n1\n") || !strings.HasSuffix(got, "<!-- section: scale-memory -->\n\nm\n\n<!-- /section -->\n") {
		t.Fatalf("prefix names:\n%s", got)
	}
}

func TestReplaceRefusesBrokenMarkers(t *testing.T) {
	for name, doc := range map[string]string{
		"no end":         "<!-- section: A -->\nx\n",
		"end after next": "<!-- section: A -->\nx\n<!-- section: B -->\ny\n<!-- /section -->\n",
		"twice":          "<!-- section: A -->\nx\n<!-- /section -->\n<!-- section: A -->\ny\n<!-- /section -->\n",
	} {
		if _, err := Replace(doc, Section{"A", "z"}); !errors.Is(err, ErrMarkers) {
			t.Errorf("%s: err %v, want ErrMarkers", name, err)
		}
	}
	if _, err := Replace("", Section{"a b", "z"}); err == nil {
		t.Error("a name with a space: no error")
	}
}

func TestReplaceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	for _, body := range []string{"one", "two"} {
		if err := ReplaceFile(path, Section{"scale", body}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), Title+"\n<!-- section: scale -->\n\ntwo\n\n<!-- /section -->\n"; got != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files left in the directory, want 1", len(entries))
	}
}

// TestResultsFile: bench/RESULTS.md as committed has one well-formed section
// per scenario, so the next run replaces them instead of refusing the file.
func TestResultsFile(t *testing.T) {
	b, err := os.ReadFile("../../RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bench", "A", "B", "AR", "D", "DR", "scale", "scale-memory"} {
		if n := strings.Count(string(b), begin(name)+"\n"); n != 1 {
			t.Errorf("RESULTS.md: section %s %d times, want once", name, n)
		}
		doc, err := Replace(string(b), Section{name, "x"})
		if err != nil {
			t.Fatalf("RESULTS.md, section %s: %v", name, err)
		}
		if len(doc) >= len(b) {
			t.Errorf("RESULTS.md: replacing section %s did not shrink the file", name)
		}
	}
}

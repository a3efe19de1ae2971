package ingest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCleanField(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"  a \t b\r\n c  ", 10, "a b c"},
		{"\x00\x07\x1b\x7f\u0085\u009b", 10, ""},
		{"a\x00b", 10, "ab"},
		{"abc", 2, "ab"},
		{"a b", 2, "a"}, // not "a " with a trailing space
		{"äöü", 2, "äö"},
		{"a\xff\xfeb", 10, "a\uFFFD\uFFFDb"},
		{"\xc3\x28", 10, "\uFFFD("},
		{"日本語", 10, "日本語"},
		{"\u00a0a\u2003\u2003b\u0085", 10, "a b"},
	}
	for _, tt := range tests {
		if got := cleanField(tt.in, tt.max); got != tt.want {
			t.Errorf("cleanField(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestCleanText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"a\r\nb\rc\n", 100, "a\nb\nc", false},
		{"x\x00y\x1bz\tw\t \n\n", 100, "xyz\tw", false},
		{"\ttab first", 100, "\ttab first", false},
		{"\xffa", 100, "\uFFFDa", false},
		{"äöü", 3, "ä", true},
		{"äöü", 4, "äö", true},
		{"a\r\n", 1, "a", false},
		{"a \t\r\n\x00", 2, "a", false},
		{"a \t\r\n\x00b", 2, "a", true},
	}
	for _, tt := range tests {
		if got, cut := cleanText(tt.in, tt.max); got != tt.want || cut != tt.cut {
			t.Errorf("cleanText(%q, %d) = %q, %v, want %q, %v", tt.in, tt.max, got, cut, tt.want, tt.cut)
		}
	}
}

func TestBoundText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 1 << 20, "short"},
		{strings.Repeat("a", 1<<20), 1 << 20, strings.Repeat("a", 1<<20)},
		{strings.Repeat("a", 1<<20) + "\r\n", 1 << 20, strings.Repeat("a", 1<<20)},
		{strings.Repeat("a", 1<<20+1), 1 << 20, strings.Repeat("a", 1<<20-len("\n[… cut by Mayfly at 1 MiB]")) + "\n[… cut by Mayfly at 1 MiB]"},
		{strings.Repeat("ü", 100), 100, strings.Repeat("ü", 33) + "\n[… cut by Mayfly at 100 bytes]"},
		{strings.Repeat("x", 3000), 2048, strings.Repeat("x", 2048-len("\n[… cut by Mayfly at 2 KiB]")) + "\n[… cut by Mayfly at 2 KiB]"},
		{"abcdef", 4, "abcd"}, // no room for the mark
	}
	for _, tt := range tests {
		got := boundText(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("boundText(%s, %d) = %s, want %s", abbrev(tt.in), tt.max, abbrev(got), abbrev(tt.want))
		}
		if len(got) > tt.max {
			t.Errorf("boundText(%s, %d) has %d bytes", abbrev(tt.in), tt.max, len(got))
		}
	}
}

// abbrev shows the start and end of a long s.
func abbrev(s string) string {
	if len(s) <= 80 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…%q (%d bytes)", s[:30], s[len(s)-40:], len(s))
}

func TestCutHTML(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"<p>abc</p>", 100, "<p>abc</p>"},
		{"<p>abc</p>", 10, "<p>abc</p>"},
		{"<p>abc</p>", 5, "<p>ab"},
		{"<p>abc</p>", 8, "<p>abc"},                   // inside the end tag
		{"<p>a &amp; b</p>", 8, "<p>a "},              // inside a character reference
		{"<p>a &amp; b</p>", 10, "<p>a &amp;"},        // just after it
		{"<p>é</p>", 4, "<p>"},                        // inside a rune
		{`<a href="https://x.example/">x</a>`, 9, ""}, // inside the first tag
	}
	for _, tt := range tests {
		got := cutHTML(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("cutHTML(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if len(got) > tt.max {
			t.Errorf("cutHTML(%q, %d) has %d bytes", tt.in, tt.max, len(got))
		}
	}
}

func TestValidUTF8(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ok é", "ok é"},
		{"a\xff\xfeb", "a\uFFFD\uFFFDb"},
		{"\xe2\x82", "\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		if got := validUTF8(tt.in); got != tt.want {
			t.Errorf("validUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestParseConcurrent shares one Parser between goroutines; run with -race.
func TestParseConcurrent(t *testing.T) {
	p := NewParser(ParserConfig{})
	raw := benchMessage(8 << 10)
	want := p.Parse(raw)
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			got := p.Parse(raw)
			if got != want {
				errs <- "concurrent Parse differs from sequential Parse"
				return
			}
			if !strings.Contains(got.HTML, "Grüße") {
				errs <- "HTML lacks its text"
				return
			}
			errs <- ""
		}()
	}
	for range 8 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// cleanTextSpec is cleanText's doc comment written as plainly as it reads,
// the oracle of TestCleanTextRuns: the line breaks as LF, the control
// characters but TAB and LF dropped, then as many runes as fit in maxBytes;
// cut when a rune that is not white space did not fit.
func cleanTextSpec(s string, maxBytes int) (out string, cut bool) {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	var text []rune // an invalid byte is utf8.RuneError, as in cleanText
	for _, r := range s {
		if r == '\t' || r == '\n' || !unicode.IsControl(r) {
			text = append(text, r)
		}
	}
	var b strings.Builder
	k := 0
	for ; k < len(text) && b.Len()+utf8.RuneLen(text[k]) <= maxBytes; k++ {
		b.WriteRune(text[k])
	}
	cut = slices.ContainsFunc(text[k:], func(r rune) bool { return !unicode.IsSpace(r) })
	return strings.TrimRight(b.String(), " \t\n"), cut
}

// TestCleanTextRuns cuts texts mixing printable ASCII runs with spaces,
// controls, CRLF and multi-byte runes at every bound, where a run meets
// the bound in its middle, at a space and at a rune it cannot split.
func TestCleanTextRuns(t *testing.T) {
	for _, s := range []string{
		"",
		"plain ascii text",
		"ends at a space then text",
		"line one\r\nline two\r\n\r\n",
		"tab\there\x00nul\x1besc\x7fdel",
		"Grüße aus Köln \u2028 and \u00a0 nbsp",
		"ab   \r\n   \t  ",
		"a\xffb\xc3(invalid)",
		"x \u00e9 y\r\r\nz",
	} {
		for max := 0; max <= len(s)+2; max++ {
			gotOut, gotCut := cleanText(s, max)
			wantOut, wantCut := cleanTextSpec(s, max)
			if gotOut != wantOut || gotCut != wantCut {
				t.Errorf("cleanText(%q, %d) = %q, %v; want %q, %v", s, max, gotOut, gotCut, wantOut, wantCut)
			}
		}
	}
}

func FuzzCleanTextRuns(f *testing.F) {
	f.Add("ends at a space then text", 8)
	f.Add("Grüße\r\naus\tKöln", 6)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > len(s)+4 {
			return
		}
		gotOut, gotCut := cleanText(s, max)
		wantOut, wantCut := cleanTextSpec(s, max)
		if gotOut != wantOut || gotCut != wantCut {
			t.Errorf("cleanText(%q, %d) = %q, %v; want %q, %v", s, max, gotOut, gotCut, wantOut, wantCut)
		}
	})
}

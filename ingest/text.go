package ingest

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cleanField turns a decoded header value into what the API may show: valid
// UTF-8, no control characters, every run of white space (CR, LF, TAB, NBSP,
// ...) one ASCII space, so a folded or hostile header cannot break a line in a
// log or a client's table, trimmed and cut to at most maxRunes runes.
func cleanField(s string, maxRunes int) string {
	var b strings.Builder
	b.Grow(min(len(s), maxRunes*utf8.UTFMax))
	space := false // a space is pending: written only before the next rune, so none trails
	n := 0
runes:
	for _, r := range s { // an invalid byte comes out as utf8.RuneError
		switch {
		case unicode.IsSpace(r):
			space = n > 0
			continue
		case unicode.IsControl(r):
			continue
		}
		if space {
			if n+1 >= maxRunes {
				break runes
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= maxRunes {
			break runes
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// cleanText normalizes a decoded text body: valid UTF-8, line breaks as "\n",
// no control characters other than TAB and LF, no trailing white space, and at
// most maxBytes bytes, cut at a rune boundary. cut reports that text other
// than white space and control characters was left out.
func cleanText(s string, maxBytes int) (out string, cut bool) {
	var b strings.Builder
	b.Grow(min(len(s), maxBytes))
runes:
	for i := 0; i < len(s); {
		// Printable ASCII, most of most bodies, goes a run at a time: a
		// rune at a time cost ~7 % of a 2 KiB message's parse.
		// At the bound the rune-at-a-time path decides what was cut.
		if j := printableASCII(s[i:]); j > 0 && b.Len() < maxBytes {
			j = min(j, maxBytes-b.Len())
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:]) // an invalid byte is utf8.RuneError
		i += size
		switch {
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			r = '\n'
		case r == '\t' || r == '\n':
		case unicode.IsControl(r):
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxBytes {
			cut = strings.IndexFunc(s[i-size:], func(r rune) bool { return !unicode.IsSpace(r) && !unicode.IsControl(r) }) >= 0
			break runes
		}
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " \t\n"), cut
}

// printableASCII is the length of s's leading run of printable ASCII
// (space to tilde), which cleanText keeps as it is.
func printableASCII(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return i
		}
	}
	return len(s)
}

// cutMark is the note that ends a body cut at maxBytes
// (ParserConfig.MaxBodyBytes), so that whoever reads text_body or html_body
// knows the message goes on: the API has no field for it (a new field would
// change the storage layout).
func cutMark(maxBytes int) string {
	size := fmt.Sprintf("%d bytes", maxBytes)
	switch {
	case maxBytes >= 1<<20 && maxBytes%(1<<20) == 0:
		size = fmt.Sprintf("%d MiB", maxBytes>>20)
	case maxBytes >= 1<<10 && maxBytes%(1<<10) == 0:
		size = fmt.Sprintf("%d KiB", maxBytes>>10)
	}
	return "[… cut by Mayfly at " + size + "]"
}

// textCutMark and htmlCutMark end a cut text_body and a cut html_body.
func textCutMark(maxBytes int) string { return "\n" + cutMark(maxBytes) }
func htmlCutMark(maxBytes int) string { return "<p>" + cutMark(maxBytes) + "</p>" }

// boundText is cleanText with the cut marked: a text longer than maxBytes is
// cut shorter, so that it and textCutMark fit in maxBytes. A bound too small
// for the mark cuts without it.
func boundText(s string, maxBytes int) string {
	out, cut := cleanText(s, maxBytes)
	mark := textCutMark(maxBytes)
	if !cut || len(mark) >= maxBytes {
		return out
	}
	return strings.TrimRight(truncateUTF8(out, maxBytes-len(mark)), " \t\n") + mark
}

// truncateUTF8 cuts s to at most max bytes without splitting a rune.
func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// cutHTML cuts sanitized HTML to at most max bytes at a point that is neither
// inside a tag nor inside a character reference. It relies on the input being
// the sanitizer's output, where '<' and '>' only delimit tags (text and
// attribute values have them escaped) and there are no comments.
func cutHTML(s string, max int) string {
	s = truncateUTF8(s, max)
	if lt := strings.LastIndexByte(s, '<'); lt > strings.LastIndexByte(s, '>') {
		s = s[:lt]
	}
	if amp := strings.LastIndexByte(s, '&'); amp >= 0 && strings.IndexByte(s[amp:], ';') < 0 {
		s = s[:amp]
	}
	return s
}

// dropControls removes the control characters other than TAB, LF and CR
// from s, as subject, from and text_body lose theirs: NUL and ESC have no
// place in HTML either (a character reference such as &#27; becomes the raw
// character once the sanitizer has decoded it, so this runs on its output).
func dropControls(s string) string {
	if !strings.ContainsFunc(s, isDroppedControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isDroppedControl(r) {
			return -1
		}
		return r
	}, s)
}

func isDroppedControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// validUTF8 replaces every byte of s that is not part of valid UTF-8 with
// U+FFFD, one per byte as a decoder would (strings.ToValidUTF8 replaces a
// whole run with one).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

package ingest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bothPaths parses raw both ways. taken reports whether the simple path took
// it; when it did, the two results must be equal.
func bothPaths(t testing.TB, p *Parser, raw []byte) (taken bool) {
	t.Helper()
	st, sh, ok := p.simpleBodies(raw)
	if !ok {
		return false
	}
	mt, mh, err := p.mimeBodies(raw, time.Time{})
	if err != nil {
		t.Fatalf("the simple path took a message the general path refuses (%v):\n%q", err, raw)
	}
	ft, fh := p.finish(st, sh, time.Time{})
	gt, gh := p.finish(mt, mh, time.Time{})
	if ft != gt || fh != gh {
		t.Fatalf("paths disagree on\n%q\nsimple:  text %q html %q\ngeneral: text %q html %q\n(raw simple %q %q, raw general %q %q)",
			raw, ft, fh, gt, gh, st, sh, mt, mh)
	}
	return true
}

// simpleShapes generates messages of the shapes the simple path is for, and
// near misses, with the variations real senders produce.
func simpleShapes(r *rand.Rand, n int) [][]byte {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	texts := []string{
		"Your code is 123456.\r\n", "Grüße aus Köln — 1 € ✓\r\nline two\r\n", "", "no final newline",
		"trailing spaces   \r\n\r\n\r\n", "tab\there\r\n--not a delimiter\r\n", "a=3Db soft=\r\nbreak =C3=BC\r\n",
		"=\r\n", "=3d lower hex\r\n", "line\n bare LF\r\n", "\r\n\r\nleading blank lines\r\n",
		strings.Repeat("long line of text ", 40) + "\r\n",
	}
	htmls := []string{
		"<p>Your code is <b>123456</b></p>\r\n", "<html><body><a href=\"https://x.example/?a=1&b=2\">link</a></body></html>",
		"<script>alert(1)</script><p onclick=\"x()\">hi</p>\r\n", "", "<p>Gr=C3=BC=C3=9Fe</p>=\r\n<p>soft</p>\r\n",
		"<img src=\"https://t.example/p.gif\"><style>p{color:red}</style>\r\n",
	}
	var out [][]byte
	for range n {
		var b strings.Builder
		b.WriteString(pick("From: A <a@example.com>\r\n", "From: a@example.com\r\n", ""))
		b.WriteString(pick("Subject: hi\r\n", "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n", ""))
		b.WriteString(pick("MIME-Version: 1.0\r\n", "", "mime-version: 1.0\r\n"))
		charset := pick("; charset=utf-8", "; charset=\"UTF-8\"", "", "; charset=us-ascii", "; charset=iso-8859-1", "; format=flowed")
		cte := pick("", "Content-Transfer-Encoding: 7bit\r\n", "Content-Transfer-Encoding: quoted-printable\r\n",
			"Content-Transfer-Encoding: 8bit\r\n", "content-transfer-encoding: Quoted-Printable\r\n", "Content-Transfer-Encoding: base64\r\n")
		switch r.IntN(4) {
		case 0: // one text part
			b.WriteString(pick("Content-Type: text/plain"+charset+"\r\n", "", "content-type: TEXT/PLAIN"+charset+"\r\n"))
			b.WriteString(cte + "\r\n" + pick(texts...))
		case 1: // one HTML part
			b.WriteString("Content-Type: text/html" + charset + "\r\n" + cte + "\r\n" + pick(htmls...))
		default: // alternative
			bd := pick("b1", "=_boundary_42", "mayfly-bench-boundary", "x y")
			q := pick(`"`+bd+`"`, bd)
			b.WriteString("Content-Type: multipart/alternative; boundary=" + q + "\r\n\r\n")
			b.WriteString(pick("", "This is a multi-part message in MIME format.\r\n", "preamble\r\n\r\n"))
			parts := []string{"text/plain", "text/html"}
			if r.IntN(3) == 0 {
				parts = []string{"text/html", "text/plain"}
			}
			if r.IntN(5) == 0 {
				parts = parts[:1]
			}
			for _, ct := range parts {
				body := pick(texts...)
				if ct == "text/html" {
					body = pick(htmls...)
				}
				b.WriteString("--" + bd + "\r\nContent-Type: " + ct + pick(charset, "; charset=utf-8") + "\r\n" +
					pick(cte, "") + "\r\n" + body + pick("\r\n", "", "\r\n\r\n"))
			}
			b.WriteString("--" + bd + "--" + pick("\r\n", "", "\r\nepilogue\r\n"))
		}
		out = append(out, []byte(b.String()))
	}
	return out
}

// TestSimplePath checks that the simple path gives what enmime gives for
// every message it takes, over the golden corpus and thousands of generated
// messages, and that it does take the common shapes (a path that declined
// everything would pass the first check).
func TestSimplePath(t *testing.T) {
	p := NewParser(ParserConfig{})
	files, err := filepath.Glob("testdata/mime/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatalf("golden corpus: %v %v", files, err)
	}
	goldenTaken := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bothPaths(t, p, raw) {
			goldenTaken++
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	taken, shapes := 0, simpleShapes(r, 5000)
	for _, raw := range shapes {
		if bothPaths(t, p, raw) {
			taken++
		}
	}
	t.Logf("simple path took %d of %d golden messages, %d of %d generated", goldenTaken, len(files), taken, len(shapes))
	if goldenTaken == 0 || taken < len(shapes)/4 {
		t.Errorf("the simple path took %d golden and %d generated messages: it declines what it is for", goldenTaken, taken)
	}
	for _, raw := range [][]byte{benchMessage(2 << 10), loadMessage()} {
		if !bothPaths(t, p, raw) {
			t.Errorf("the simple path declined a plain multipart/alternative message:\n%.300q", raw)
		}
	}
}

// loadMessage is bench/internal/load's message (scenario D's).
func loadMessage() []byte {
	const boundary = "mayfly-bench-boundary"
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load <load@bench.example>\r\nTo: inbox\r\nSubject: s-1\r\n")
	fmt.Fprintf(&b, "MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=%q\r\n\r\n", boundary)
	line := "Your verification code is 123456. It expires in ten minutes, so use it soon.\r\n"
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s", boundary, strings.Repeat(line, 10))
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n", boundary)
	for range 10 {
		b.WriteString("<p>" + strings.TrimSuffix(line, "\r\n") + "</p>\r\n")
	}
	fmt.Fprintf(&b, "</body></html>\r\n--%s--\r\n", boundary)
	return []byte(b.String())
}

// FuzzSimple: on any input the simple path takes, both paths agree.
func FuzzSimple(f *testing.F) {
	files, _ := filepath.Glob("testdata/mime/*.eml")
	for _, file := range files {
		if raw, err := os.ReadFile(file); err == nil {
			f.Add(raw)
		}
	}
	for _, raw := range simpleShapes(rand.New(rand.NewPCG(3, 4)), 40) {
		f.Add(raw)
	}
	p := NewParser(ParserConfig{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		bothPaths(t, p, raw)
	})
}

package ingest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// The shapes that cost the general path the most per byte, each within every
// structural limit (parts, depth, header size, boundary length, delimiters
// per part header), so that only a bound on work or time refuses them.

// deepHead writes a top-level header opening container b0 and the part
// headers of depth-1 more containers, each inside the one before (depth
// containers open, depth-1 parts used).
func deepHead(b *bytes.Buffer, subject string, depth int) (innermost string) {
	fmt.Fprintf(b, "From: bomb@example.org\r\nSubject: %s\r\nContent-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n", subject)
	for i := 1; i < depth; i++ {
		fmt.Fprintf(b, "--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", i-1, i)
	}
	return fmt.Sprintf("b%d", depth-1)
}

// deepTail closes depth containers.
func deepTail(b *bytes.Buffer, depth int) {
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(b, "\r\n--b%d--", i)
	}
	b.WriteString("\r\n")
}

// overlappingHeaders is MaxDepth containers open and then parts whose
// headers overlap: every part starts inside the header of the one before
// ("zzxx--b9 " starts a part anywhere in a line, for enmime as for the
// pre-scan) and no blank line ends any of them before the region's end, so
// the pre-scan reads the region once per part. The parts are spaced so that
// each header holds at most 6 places where enmime could end it (the pre-scan
// allows 8). The filler, "\r-" pairs, makes every CR a place the pre-scan
// must compare against every open boundary. regions of about 60 KiB each
// hold starts parts each.
func overlappingHeaders(regions, starts int) []byte {
	var b bytes.Buffer
	last := deepHead(&b, "overlapping part headers", DefaultMaxDepth)
	for range regions {
		r0 := b.Len()
		for range starts {
			s0 := b.Len()
			b.WriteString("zzxx--" + last + " \r\n")
			for b.Len()-s0 < 2100 {
				b.WriteString("\r-")
			}
		}
		for b.Len()-r0 < 60<<10 {
			b.WriteString("\r-")
		}
		b.WriteString("\r\n\r\nbody\r\n")
	}
	deepTail(&b, DefaultMaxDepth)
	return b.Bytes()
}

// cutHeaders is overlappingHeaders with header lines ("a: b", which cost
// enmime's header reader the most per byte) for filler, parts 8.3 KiB apart
// (past the first 8 KiB of each other's header, where enmime could end a
// part at two places in each delimiter line) and at the end of each region 8
// delimiter lines at the start of a line: each is a place where enmime could
// end every header that started before it, so each such header is read 9
// times, up to each of them and whole.
func cutHeaders(regions int) []byte {
	var b bytes.Buffer
	last := deepHead(&b, "cut part headers", DefaultMaxDepth)
	fill := func(n int) {
		for s0 := b.Len(); b.Len()-s0 < n; {
			b.WriteString("a: b\n")
		}
	}
	for range regions {
		for range 4 {
			b.WriteString("zzxx--" + last + " \n")
			fill(8300)
		}
		for i := range 8 {
			b.WriteString("--" + last + " \n")
			if i < 7 {
				fill(4200)
			}
		}
		b.WriteString("\r\n\r\nbody\r\n")
	}
	deepTail(&b, DefaultMaxDepth)
	return b.Bytes()
}

// fatHeaders is MaxDepth containers open and then parts of header sections
// just under MaxHeaderBytes, filled with bare CRs (each one a place where
// enmime might end a part, to be compared against every open boundary), up
// to MaxParts parts in all, then text up to size bytes at depth MaxDepth.
func fatHeaders(size int) []byte {
	var b bytes.Buffer
	last := deepHead(&b, "fat part headers", DefaultMaxDepth)
	for range DefaultMaxParts - (DefaultMaxDepth - 1) {
		s0 := b.Len()
		b.WriteString("--" + last + "\r\n")
		for b.Len()-s0 < DefaultMaxHeaderBytes-64 {
			b.WriteString("\r")
		}
		b.WriteString("\r\n\r\nbody\r\n")
		if b.Len() > size/2 {
			break
		}
	}
	for b.Len() < size-1024 {
		b.WriteString("\r-")
	}
	deepTail(&b, DefaultMaxDepth)
	return b.Bytes()
}

// deepBody is one text part MaxDepth containers deep, of size bytes of "\r-":
// each of enmime's MaxDepth boundary readers peeks at every CR.
func deepBody(size int) []byte {
	var b bytes.Buffer
	last := deepHead(&b, "deep body", DefaultMaxDepth)
	b.WriteString("--" + last + "\r\nContent-Type: text/plain\r\n\r\n")
	for b.Len() < size-1024 {
		b.WriteString("\r-")
	}
	deepTail(&b, DefaultMaxDepth)
	return b.Bytes()
}

// bigHTML is one text/html part of size bytes of styled markup (the simple
// path; the cost is the sanitizer's).
func bigHTML(size int) []byte {
	var b bytes.Buffer
	b.WriteString("From: bomb@example.org\r\nSubject: big html\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
	const unit = `<p style="color: red; font-family: Arial; margin: 0 1px 2px 3px">x <a href="https://a.example/x?y=1">l</a></p>` + "\r\n"
	for b.Len() < size-len(unit) {
		b.WriteString(unit)
	}
	return b.Bytes()
}

// TestParseScanWork: a message whose part headers overlap costs the
// pre-scan one reading of the region per part (22 here), many times its
// size, within every structural limit (91 ms for these 62 KiB before the
// bound). It is stored as failed (too_complex) after a bounded amount of
// work; the same content with each part header closed by its own blank
// line is read once and is ready.
func TestParseScanWork(t *testing.T) {
	p := NewParser(ParserConfig{})
	raw, err := os.ReadFile("testdata/mime/overlapping-headers.eml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, overlappingHeaders(1, 22)) {
		t.Fatal("testdata/mime/overlapping-headers.eml is not overlappingHeaders(1, 22); rewrite it")
	}
	msg, why := p.parse(raw)
	if got, want := msg.Status, storage.StatusFailed; got != want {
		t.Fatalf("Status = %q, want %q", got, want)
	}
	if got, want := failReason(why), "too_complex"; got != want {
		t.Errorf("failReason = %q (%v), want %q", got, why, want)
	}
	if got, want := msg.Subject, "overlapping part headers"; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}

	// The same parts, each header ended by a blank line right after its
	// delimiter line: no overlap, each byte read once.
	closed := bytes.ReplaceAll(raw, []byte(" \r\n\r-"), []byte(" \r\n\r\n\r-"))
	if msg, why := p.parse(closed); msg.Status != storage.StatusReady {
		t.Errorf("with each part header closed: Status = %q (%v), want ready", msg.Status, why)
	}
}

// TestParseDeadline: a parse still running at its deadline stops at the
// next read of its input, on the general path (enmime) as on the simple one
// (the HTML sanitizer), and the message is stored as failed (timeout). The
// deadline is already past here, so the test does not depend on the
// machine's speed.
func TestParseDeadline(t *testing.T) {
	p := NewParser(ParserConfig{})
	past := time.Now().Add(-time.Second)
	general := "From: a@example.org\r\nSubject: deadline\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n"
	html := "From: a@example.org\r\nSubject: deadline\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>hello</p>\r\n"
	for _, raw := range []string{general, html} {
		if msg, why := p.parse([]byte(raw)); msg.Status != storage.StatusReady {
			t.Fatalf("without a deadline: Status = %q (%v), want ready", msg.Status, why)
		}
		msg, why := p.parseUntil([]byte(raw), past)
		if got, want := msg.Status, storage.StatusFailed; got != want {
			t.Errorf("Status = %q, want %q", got, want)
		}
		if got, want := failReason(why), "timeout"; got != want {
			t.Errorf("failReason = %q (%v), want %q", got, why, want)
		}
		if got, want := msg.Subject, "deadline"; got != want {
			t.Errorf("Subject = %q, want %q", got, want)
		}
		if msg.Text != "" || msg.HTML != "" {
			t.Errorf("a failed message has bodies: %q, %q", msg.Text, msg.HTML)
		}
	}
}

// BenchmarkParseWorst measures the costliest shapes of a 10 MiB message
// found: the pre-scan alone and the whole Parse. Run with -benchtime 1x
// (each takes up to seconds).
func BenchmarkParseWorst(b *testing.B) {
	const size = 10 << 20
	p := NewParser(ParserConfig{})
	for _, c := range []struct {
		name string
		raw  []byte
	}{
		{"overlapping-headers", overlappingHeaders(4, 22)},
		{"overlapping-headers-10MiB", padDeep(overlappingHeaders(4, 22), size)},
		{"cut-headers", cutHeaders(7)},
		{"cut-headers-10MiB", padDeep(cutHeaders(7), size)},
		{"fat-headers-10MiB", fatHeaders(size)},
		{"deep-body-10MiB", deepBody(size)},
		{"html-10MiB", bigHTML(size)},
	} {
		b.Run(c.name+"/prescan", func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			for b.Loop() {
				_ = p.prescan(c.raw)
			}
		})
		b.Run(c.name+"/parse", func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			var msg storage.NewMessage
			var why error
			for b.Loop() {
				msg, why = p.parse(c.raw)
			}
			b.Logf("%s: %d bytes, %s %v", c.name, len(c.raw), msg.Status, why)
		})
	}
}

// padDeep inserts "\r-" filler before raw's closing delimiters (its last
// MaxDepth lines) up to size bytes: more body for every open container.
func padDeep(raw []byte, size int) []byte {
	tail := bytes.Index(raw, []byte("\r\n--b"+fmt.Sprint(DefaultMaxDepth-1)+"--"))
	return append(append(bytes.Clone(raw[:tail]), strings.Repeat("\r-", (size-len(raw))/2)...), raw[tail:]...)
}

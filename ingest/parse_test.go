package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jhillyerd/enmime/v2"

	"github.com/mayfly/mayfly/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestParseGolden")

// golden is what the API serves of a parsed message.
type golden struct {
	From     string `json:"from"`
	Subject  string `json:"subject"`
	Status   string `json:"status"`
	TextBody string `json:"text_body"`
	HTMLBody string `json:"html_body"`
}

func goldenOf(m storage.NewMessage) golden {
	return golden{From: m.From, Subject: m.Subject, Status: string(m.Status), TextBody: m.Text, HTMLBody: m.HTML}
}

func marshalGolden(g golden) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestParseGolden parses every testdata/mime/*.eml and compares the result
// with its .golden.json. Run with -update to rewrite the goldens, then read
// every changed one: a golden is what a user should see, not merely what the
// code produced.
func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/mime/*.eml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d .eml files, want the whole corpus (>= 20)", len(files))
	}
	p := NewParser(ParserConfig{})
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".eml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := marshalGolden(goldenOf(p.Parse(raw)))
			path := strings.TrimSuffix(file, ".eml") + ".golden.json"
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestParseGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Parse(%s) differs from %s\ngot:\n%s\nwant:\n%s", file, path, got, want)
			}
		})
	}
}

// TestParseCorpusInvariants checks, per corpus file, properties that hold
// whatever the golden says, so a careless -update cannot hide them.
func TestParseCorpusInvariants(t *testing.T) {
	tests := []struct {
		file    string
		status  storage.Status
		notIn   []string // must appear in no field
		inText  []string
		inHTML  []string
		subject string
		from    string
	}{
		{file: "alternative", status: storage.StatusReady, inText: []string{"3 résumés", "report?id=7"}, inHTML: []string{"<b>weekly report</b>", `rel="nofollow noreferrer noopener"`}, notIn: []string{"<style", "color: red", "Weekly report</title"}},
		{file: "nested", status: storage.StatusReady, inText: []string{"Plain version of the nested message."}, inHTML: []string{"<h1>Nested</h1>", `alt="Logo"`}, notIn: []string{"SECRET-ATTACHMENT-TEXT", "cid:"}},
		{file: "html-only", status: storage.StatusReady, inText: []string{"This week's offers", "Buy now"}, inHTML: []string{`href="mailto:help@shop.example"`, `target="_blank"`}, notIn: []string{"<script", "document.cookie", "onload", "onclick", "javascript:", "track.example", "evil.example", "<iframe", "<form", "<input", "expression(", "<meta", "<base", "<link", "http://shop.example/banner.jpg", "<style"}},
		{file: "iso-8859-1", status: storage.StatusReady, from: "Jörg Müller <joerg@example.de>", subject: "Grüße aus Köln", inText: []string{"Grüße aus Köln!", "Straße, Maß, Übergröße, naïve café, ½ Portion, © 2025."}},
		{file: "windows-1252", status: storage.StatusReady, from: "“Quoted” Sender <q@example.com>", subject: "Price € 100 – final", inText: []string{"“Smart quotes” and ‘single’ ones – an en dash, — an em dash.", "€ 100… that’s all. © Café S.A."}},
		{file: "iso-2022-jp", status: storage.StatusReady, from: "山田太郎 <taro@example.jp>", subject: "日本語の件名", inText: []string{"こんにちは、世界。", "日本語の件名と本文。"}},
		{file: "utf8-8bit", status: storage.StatusReady, from: "Jörg Ünal <jörg@bücher.example>", subject: "Ünïcödé 8bit – 日本 🚀", inText: []string{"Ελληνικά, русский, 日本語, emoji 🚀🎉."}},
		{file: "quoted-printable", status: storage.StatusReady, inText: []string{"with a soft line break, and it must come out as one line.", "1 + 1 = 2. Tab:\tend.", "€ 5, über."}},
		{file: "base64", status: storage.StatusReady, inText: []string{"Base64 encoded text: Grüße 👋\nSecond line."}, inHTML: []string{"<em>HTML</em>", "color: red", "font-weight: bold"}},
		{file: "rfc2047", status: storage.StatusReady, from: "Jörg Example <joerg@example.org>", subject: "Café über Straße and plain words"},
		{file: "rfc2231", status: storage.StatusReady, inText: []string{"Prix: 10 €."}, notIn: []string{"ATTACHMENT-TEXT-MUST-NOT-SHOW"}},
		{file: "broken-boundary", status: storage.StatusReady, inText: []string{"First part survives"}, inHTML: []string{"HTML part survives too."}, notIn: []string{"preamble text"}},
		{file: "missing-content-type", status: storage.StatusReady, from: "Dave <dave@example.org>", inText: []string{"A message without MIME headers is text/plain"}},
		{file: "attachment", status: storage.StatusReady, inText: []string{"The report and the notes are attached."}, notIn: []string{"MUST-NOT-SHOW"}},
		{file: "message-rfc822", status: storage.StatusReady, inText: []string{"See the forwarded message below."}, notIn: []string{"INNER-MESSAGE", "The original"}},
		{file: "invalid-utf8-header", status: storage.StatusReady, subject: "Invalid \uFFFD\uFFFD bytes and Latin-1 \uFFFDt\uFFFD in a raw header", inText: []string{"invalid byte \uFFFD here and valid UTF-8 é here"}},
		{file: "control-chars", status: storage.StatusReady, subject: "Bell Esc[31m red Tab CR LF null C1 end", inText: []string{"NUL, a bell and a tab\tkept.\nCRLF and a lone CR\nstay line breaks."}},
		{file: "unparsable", status: storage.StatusFailed, from: "Eve <eve@example.org>", subject: "Cannot be parsed", notIn: []string{"never shown"}},
		{file: "too-deep", status: storage.StatusFailed, subject: "Nested eleven levels deep", notIn: []string{"too deep to be shown"}},
		{file: "overlapping-headers", status: storage.StatusFailed, from: "bomb@example.org", subject: "overlapping part headers"},
		{file: "multi-text", status: storage.StatusReady, inText: []string{"First inline text part.\n--\nSecond inline text part"}},
		{file: "html-images", status: storage.StatusReady, inHTML: []string{`<img src="data:image/gif;base64,`, `alt="Company logo"`, `alt="attached"`}, notIn: []string{"image/svg", "cdn.example.org", "cid:"}},
	}
	p := NewParser(ParserConfig{})
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "mime", tt.file+".eml"))
			if err != nil {
				t.Fatal(err)
			}
			m := p.Parse(raw)
			if got, want := m.Status, tt.status; got != want {
				t.Errorf("Status = %q, want %q", got, want)
			}
			if tt.from != "" && m.From != tt.from {
				t.Errorf("From = %q, want %q", m.From, tt.from)
			}
			if tt.subject != "" && m.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", m.Subject, tt.subject)
			}
			for _, s := range tt.inText {
				if !strings.Contains(m.Text, s) {
					t.Errorf("Text lacks %q; Text = %q", s, m.Text)
				}
			}
			for _, s := range tt.inHTML {
				if !strings.Contains(m.HTML, s) {
					t.Errorf("HTML lacks %q; HTML = %q", s, m.HTML)
				}
			}
			for _, s := range tt.notIn {
				for field, v := range map[string]string{"From": m.From, "Subject": m.Subject, "Text": m.Text, "HTML": m.HTML} {
					if strings.Contains(v, s) {
						t.Errorf("%s contains %q: %q", field, s, v)
					}
				}
			}
			if m.Status == storage.StatusFailed && (m.Text != "" || m.HTML != "") {
				t.Errorf("failed message has bodies: Text %q, HTML %q", m.Text, m.HTML)
			}
			if err := checkHTML(m.HTML, true); err != nil {
				t.Errorf("HTML not safe: %v\n%s", err, m.HTML)
			}
		})
	}
}

func TestParseRemoteImages(t *testing.T) {
	raw, err := os.ReadFile("testdata/mime/html-images.eml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		remote bool
		want   bool // whether the https image is kept
	}{
		{remote: false, want: false},
		{remote: true, want: true},
	}
	for _, tt := range tests {
		m := NewParser(ParserConfig{RemoteImages: tt.remote}).Parse(raw)
		if got := strings.Contains(m.HTML, `src="https://cdn.example.org/logo.png"`); got != tt.want {
			t.Errorf("RemoteImages=%v: https image kept = %v, want %v\n%s", tt.remote, got, tt.want, m.HTML)
		}
		if strings.Contains(m.HTML, "cid:") || strings.Contains(m.HTML, "image/svg") {
			t.Errorf("RemoteImages=%v: cid or svg image kept\n%s", tt.remote, m.HTML)
		}
	}
}

func TestParseFields(t *testing.T) {
	long := strings.Repeat("é", 600)
	tests := []struct {
		name        string
		from, subj  string // raw header values
		wantFrom    string
		wantSubject string
	}{
		{"name and address", `"Jörg" <joerg@example.org>`, "hi", "Jörg <joerg@example.org>", "hi"},
		{"bare address", "joerg@example.org", "hi", "joerg@example.org", "hi"},
		{"angle address only", "<joerg@example.org>", "hi", "joerg@example.org", "hi"},
		{"two addresses", "A <a@example.org>, b@example.org", "hi", "A <a@example.org>, b@example.org", "hi"},
		{"comma in quoted name", `"Doe, John" <j@example.org>`, "hi", "Doe, John <j@example.org>", "hi"},
		{"unparsable from", "not an address at all", "hi", "not an address at all", "hi"},
		{"encoded unparsable from", "=?utf-8?q?J=C3=B6rg?= @@", "hi", "Jörg @@", "hi"},
		{"no from", "", "hi", "", "hi"},
		{"folded subject", "a@example.org", "one\r\n two\r\n\tthree", "a@example.org", "one two three"},
		{"spaces collapsed and trimmed", "a@example.org", "   a    b   ", "a@example.org", "a b"},
		{"Q encoding with underscores", "a@example.org", "=?utf-8?Q?a_b=5Fc?=", "a@example.org", "a b_c"},
		{"B encoding", "a@example.org", "=?utf-8?B?w6TDtsO8?=", "a@example.org", "äöü"},
		{"unknown charset kept raw", "a@example.org", "=?x-unknown?Q?abc?=", "a@example.org", "=?x-unknown?Q?abc?="},
		{"encoded control chars", "a@example.org", "=?utf-8?Q?a=00b=1Bc=0D=0Ad=7Fe=C2=9Bf?=", "a@example.org", "abc def"},
		{"encoded bidi override kept", "a@example.org", "=?utf-8?Q?a=E2=80=AEb?=", "a@example.org", "a\u202eb"},
		{"long subject cut", "a@example.org", long, "a@example.org", strings.Repeat("é", DefaultMaxFieldRunes)},
		{"equals sign in decoded subject", "a@example.org", "=?utf-8?q?a=3Db?=", "a@example.org", "a=b"},
	}
	p := NewParser(ParserConfig{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw strings.Builder
			if tt.from != "" {
				fmt.Fprintf(&raw, "From: %s\r\n", tt.from)
			}
			fmt.Fprintf(&raw, "Subject: %s\r\nContent-Type: text/plain\r\n\r\nbody\r\n", tt.subj)
			m := p.Parse([]byte(raw.String()))
			if got, want := m.From, tt.wantFrom; got != want {
				t.Errorf("From = %q, want %q", got, want)
			}
			if got, want := m.Subject, tt.wantSubject; got != want {
				t.Errorf("Subject = %q, want %q", got, want)
			}
			if got, want := m.Status, storage.StatusReady; got != want {
				t.Errorf("Status = %q, want %q", got, want)
			}
		})
	}
}

func TestParseBodyLimit(t *testing.T) {
	const max = 1000
	p := NewParser(ParserConfig{MaxBodyBytes: max})
	text := strings.Repeat("ü", 2*max)
	var html strings.Builder
	for html.Len() < 4*max {
		html.WriteString(`<p>x &amp; <a href="https://example.org/a?b=1&amp;c=2">link</a> <b>é</b></p>`)
	}
	raw := "Subject: big\r\nContent-Type: multipart/alternative; boundary=B\r\n\r\n" +
		"--B\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + text + "\r\n" +
		"--B\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html.String() + "\r\n--B--\r\n"
	m := p.Parse([]byte(raw))
	if got, want := m.Status, storage.StatusReady; got != want {
		t.Fatalf("Status = %q, want %q", got, want)
	}
	// Each body ends with the mark of its cut, within the bound.
	textMark, htmlMark := "\n[… cut by Mayfly at 1000 bytes]", "<p>[… cut by Mayfly at 1000 bytes]</p>"
	if got, want := m.Text, strings.Repeat("ü", (max-len(textMark))/2)+textMark; got != want {
		t.Errorf("Text has %d bytes (ends %q), want the first %d bytes of the body and %q", len(got), got[len(got)-min(len(got), 40):], len(want)-len(textMark), textMark)
	}
	if len(m.HTML) > max || len(m.HTML) < max/2 {
		t.Errorf("len(HTML) = %d, want in [%d, %d]", len(m.HTML), max/2, max)
	}
	if !strings.HasSuffix(m.HTML, htmlMark) {
		t.Errorf("HTML ends %q, want %q", m.HTML[len(m.HTML)-min(len(m.HTML), 60):], htmlMark)
	}
	if !utf8.ValidString(m.HTML) || !strings.HasPrefix(m.HTML, "<p>x &amp; <a ") {
		t.Errorf("HTML = %q", m.HTML)
	}
	if got := p.Sanitize(m.HTML); got != m.HTML {
		t.Errorf("cut HTML is not stable under Sanitize:\n got %q\nwant %q", got, m.HTML)
	}
	if err := checkHTML(m.HTML, false); err != nil {
		t.Error(err)
	}
}

// TestParseLimits checks each limit at its bound and one past it.
func TestParseLimits(t *testing.T) {
	cfg := ParserConfig{MaxParts: 10, MaxDepth: 3, MaxHeaderBytes: 400}
	tests := []struct {
		name string
		raw  string
		want error // from prescan; nil means the message is ready
	}{
		{"parts at limit", flat(10), nil},
		{"parts past limit", flat(11), errTooManyParts},
		{"depth at limit", nested(3), nil},
		{"depth past limit", nested(4), errTooDeep},
		{"top header at limit", "Subject: " + strings.Repeat("x", 400-len("Subject: \r\n\r\n")) + "\r\n\r\nbody", nil},
		{"top header past limit", "Subject: " + strings.Repeat("x", 401-len("Subject: \r\n\r\n")) + "\r\n\r\nbody", errHeaderTooLarge},
		{"part header past limit", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-Pad: " + strings.Repeat("x", 400) + "\r\n\r\nbody\r\n--b--\r\n", errHeaderTooLarge},
		{"part header without blank line past limit", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" + strings.Repeat("x", 500), errHeaderTooLarge},
		{"boundary too long", "Content-Type: multipart/mixed; boundary=" + strings.Repeat("b", maxBoundaryLen+1) + "\r\n\r\n", errBoundaryTooLong},
		{"delimiters inside lines count", "Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("x --b \r\n\r\nbody\r\n", 11), errTooManyParts},
		{"delimiters inside a part header", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nX-A: 1" + strings.Repeat(" --b ", maxHeaderCuts+1) + "\r\n\r\nbody\r\n--b--\r\n", errAmbiguousHeader},
		{"terminator closes depth", closedSiblings(5), nil},
		{"unterminated containers count as open", unclosedSiblings(3), errTooDeep},
		{"media type parameters at limit", "Content-Type: text/plain" + strings.Repeat("; a=b", maxMediaTypeParams) + "\r\n\r\nx", nil},
		{"media type parameters past limit", "Content-Type: text/plain" + strings.Repeat("; a=b", maxMediaTypeParams+1) + "\r\n\r\nx", errMediaTypeTooLong},
		{"disposition parameters past limit in a part", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment" + strings.Repeat(";a=b", maxMediaTypeParams+1) + "\r\n\r\nx\r\n--b--\r\n", errMediaTypeTooLong},
	}
	p := NewParser(cfg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.prescan([]byte(tt.raw))
			if !errors.Is(err, tt.want) {
				t.Fatalf("prescan = %v, want %v", err, tt.want)
			}
			want := storage.StatusReady
			if tt.want != nil {
				want = storage.StatusFailed
			}
			msg, why := p.parse([]byte(tt.raw))
			if got := msg.Status; got != want {
				t.Errorf("Status = %q, want %q", got, want)
			}
			if tt.want != nil {
				// The reason logged and counted names the limit, from the fixed set.
				if got, want := failReason(why), failReason(tt.want); got != want || got == "other" {
					t.Errorf("failReason = %q, want %q (not other)", got, want)
				}
			}
		})
	}
}

// flat is a multipart/mixed message with n text parts.
func flat(n int) string {
	var b strings.Builder
	b.WriteString("Subject: flat\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := range n {
		fmt.Fprintf(&b, "--b\r\nContent-Type: text/plain\r\n\r\npart %d\r\n", i)
	}
	b.WriteString("--b--\r\n")
	return b.String()
}

// nested is a message of depth multipart containers, one inside the other.
func nested(depth int) string {
	var b strings.Builder
	b.WriteString("Subject: nested\r\nContent-Type: multipart/mixed; boundary=d0\r\n\r\n")
	for i := 1; i < depth; i++ {
		fmt.Fprintf(&b, "--d%d\r\nContent-Type: multipart/mixed; boundary=d%d\r\n\r\n", i-1, i)
	}
	fmt.Fprintf(&b, "--d%d\r\nContent-Type: text/plain\r\n\r\ndeep\r\n", depth-1)
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--d%d--\r\n", i)
	}
	return b.String()
}

// closedSiblings is a multipart/mixed holding n closed multipart/alternative
// siblings: depth 2 however large n is.
func closedSiblings(n int) string {
	var b strings.Builder
	b.WriteString("Subject: siblings\r\nContent-Type: multipart/mixed; boundary=m\r\n\r\n")
	for i := range n {
		fmt.Fprintf(&b, "--m\r\nContent-Type: multipart/alternative; boundary=a%d\r\n\r\n--a%d\r\nContent-Type: text/plain\r\n\r\ntext\r\n--a%d--\r\n", i, i, i)
	}
	b.WriteString("--m--\r\n")
	return b.String()
}

// unclosedSiblings is closedSiblings without the inner terminators: the
// pre-scan cannot tell when each inner container ends, so it counts them as
// nested.
func unclosedSiblings(n int) string {
	return regexp.MustCompile(`--a[0-9]+--\r\n`).ReplaceAllString(closedSiblings(n), "")
}

// Bombs that cost enmime seconds and gigabytes when unbounded.
func bombParts(n int) []byte {
	var b bytes.Buffer
	b.WriteString("From: bomb@example.org\r\nSubject: parts bomb\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for range n {
		b.WriteString("--b\r\n\r\nx\r\n")
	}
	b.WriteString("--b--\r\n")
	return b.Bytes()
}

func bombDepth(n int) []byte {
	var b bytes.Buffer
	b.WriteString("From: bomb@example.org\r\nSubject: depth bomb\r\nContent-Type: multipart/mixed; boundary=0\r\n\r\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "--%d\r\nContent-Type: multipart/mixed; boundary=%d\r\n\r\n", i-1, i)
	}
	return b.Bytes()
}

func bombHeader(size int) []byte {
	var b bytes.Buffer
	b.WriteString("From: bomb@example.org\r\nSubject: header bomb\r\n")
	for b.Len() < size {
		b.WriteString("X-Filler: " + strings.Repeat("y", 60) + "\r\n")
	}
	b.WriteString("\r\nbody\r\n")
	return b.Bytes()
}

func bombPartHeader(size int) []byte {
	var b bytes.Buffer
	b.WriteString("From: bomb@example.org\r\nSubject: part header bomb\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n")
	for b.Len() < size {
		b.WriteString(":\r\n")
	}
	b.WriteString("\r\nbody\r\n--b--\r\n")
	return b.Bytes()
}

var bombs = []struct {
	name string
	raw  []byte
}{
	{"parts-20000", bombParts(20000)},
	{"depth-2000", bombDepth(2000)},
	{"header-1MiB", bombHeader(1 << 20)},
	{"part-header-1MiB", bombPartHeader(1 << 20)},
}

// TestParseBombs checks that MIME bombs are refused by the pre-scan: stored
// as failed with their From and Subject, after allocating little more than
// the message itself. How fast that is, BenchmarkParseBomb measures.
func TestParseBombs(t *testing.T) {
	p := NewParser(ParserConfig{})
	for _, bomb := range bombs {
		t.Run(bomb.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m := p.Parse(bomb.raw)
			runtime.ReadMemStats(&after)
			if got, want := m.Status, storage.StatusFailed; got != want {
				t.Errorf("Status = %q, want %q", got, want)
			}
			if got, want := m.From, "bomb@example.org"; got != want {
				t.Errorf("From = %q, want %q", got, want)
			}
			if !strings.HasSuffix(m.Subject, "bomb") {
				t.Errorf("Subject = %q, want the bomb's subject", m.Subject)
			}
			// Unbounded, enmime allocates gigabytes on these; the pre-scan
			// allocates a few header parses.
			if got, max := after.TotalAlloc-before.TotalAlloc, uint64(8<<20); got > max {
				t.Errorf("Parse allocated %d bytes, want <= %d", got, max)
			}
		})
	}
}

// TestPrescanAgreesWithEnmime parses messages the pre-scan accepts with
// enmime and checks that enmime found no more parts and no deeper nesting
// than the limits: the pre-scan must never under-count.
func TestPrescanAgreesWithEnmime(t *testing.T) {
	cfg := ParserConfig{MaxParts: 5, MaxDepth: 3}
	p := NewParser(cfg)
	files, _ := filepath.Glob("testdata/mime/*.eml")
	var inputs [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, raw)
	}
	for _, s := range []string{flat(5), nested(3), closedSiblings(5)} {
		inputs = append(inputs, []byte(s))
	}
	for i, raw := range inputs {
		if err := agreesWithEnmime(p, raw); err != nil {
			t.Errorf("input %d: %v", i, err)
		}
	}
}

// TestPrescanRandomMIME generates messages from a grammar of MIME fragments
// chosen to confuse a boundary scanner — short boundaries that prefix each
// other, delimiters inside lines, bare CRs, headers without blank lines,
// unclosed and reused boundaries — and checks that enmime never finds more
// parts or depth in a message than the pre-scan allowed.
func TestPrescanRandomMIME(t *testing.T) {
	t.Parallel()
	const n = 10000
	p := NewParser(ParserConfig{MaxParts: 4, MaxDepth: 2, MaxHeaderBytes: 256})
	accepted, atLimit := 0, 0
	for seed := range uint64(n) {
		raw := randomMIME(seed)
		if p.prescan(raw) == nil {
			accepted++
			if root, err := p.mime.ReadParts(bytes.NewReader(raw)); err == nil {
				if parts, depth := shape(root); parts == p.cfg.MaxParts || depth == p.cfg.MaxDepth {
					atLimit++
				}
			}
		}
		if err := agreesWithEnmime(p, raw); err != nil {
			t.Fatalf("seed %d: %v\n%q", seed, err, raw)
		}
	}
	// Both outcomes must be common, and many accepted messages must reach a
	// limit in enmime's eyes, or the grammar tests nothing.
	if accepted < n/5 || accepted > n*4/5 || atLimit < n/20 {
		t.Errorf("pre-scan accepted %d of %d messages, %d of them at a limit; want a mix", accepted, n, atLimit)
	}
}

// FuzzPrescan runs TestPrescanRandomMIME's check on fuzzer-chosen seeds.
func FuzzPrescan(f *testing.F) {
	f.Add(uint64(1))
	p := NewParser(ParserConfig{MaxParts: 4, MaxDepth: 2, MaxHeaderBytes: 256})
	f.Fuzz(func(t *testing.T, seed uint64) {
		if err := agreesWithEnmime(p, randomMIME(seed)); err != nil {
			t.Fatal(err)
		}
	})
}

// randomMIME builds a message of random MIME fragments from seed: mostly
// part-shaped (a delimiter, maybe a Content-Type, maybe a blank line, a
// body) and mostly using the boundary declared last, mixed with lines that
// only look like parts of MIME.
func randomMIME(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	boundaries := []string{"a", "ab", "a b", "=_x"}
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	var open []string // boundaries declared, innermost last
	b := func() string {
		if len(open) > 0 && r.IntN(4) > 0 {
			return open[len(open)-1]
		}
		return boundaries[r.IntN(len(boundaries))]
	}
	nl := func() string {
		if r.IntN(12) == 0 {
			return pick("\r", "\n\r\n", "\r\r\n")
		}
		return pick("\r\n", "\n")
	}
	ctype := func() string {
		bb := boundaries[r.IntN(len(boundaries))]
		ct := pick("Content-Type: multipart/mixed; boundary=\""+bb+"\"",
			"Content-Type: multipart/mixed; boundary=\""+bb+"\"",
			"Content-Type: multipart/alternative;"+nl()+" boundary=\""+bb+"\"",
			"Content-type: application/x; boundary=\""+bb+"\"",
			"Content-Type: multipart/mixed; boundary*0=\""+bb[:1]+"\"; boundary*1=\""+bb[1:]+"\"",
			"Content-Type: text/plain; boundary=\""+bb+"\"",
			"Content-Type: text/plain",
			"X-Other: multipart/mixed; boundary=\""+bb+"\"")
		if strings.Contains(ct, "boundary") {
			open = append(open, bb)
		}
		return ct
	}
	var m strings.Builder
	root := ctype()
	if r.IntN(4) > 0 {
		open = append(open[:0], boundaries[r.IntN(len(boundaries))])
		root = "Content-Type: multipart/mixed; boundary=\"" + open[0] + "\""
	}
	m.WriteString("Subject: random\r\n" + root + "\r\n\r\n")
	for range r.IntN(30) {
		switch r.IntN(7) {
		case 0, 1, 2: // a part
			m.WriteString(pick("", "", "", "", "", "x", " ", "\r") + "--" + b() + pick("", "", " ", "\t", "x") + nl())
			if r.IntN(3) > 0 {
				m.WriteString(ctype() + nl())
			}
			if r.IntN(6) > 0 {
				m.WriteString(nl())
			}
			if r.IntN(2) > 0 {
				m.WriteString(pick("body", "x --"+b()+" y", strings.Repeat("y", r.IntN(300))) + nl())
			}
		case 3: // a terminator
			m.WriteString(pick("", "", "", "x") + "--" + b() + "--" + nl())
			if len(open) > 0 && r.IntN(2) > 0 {
				open = open[:len(open)-1]
			}
		case 4: // a header line out of place
			m.WriteString(pick(ctype(), "Content-Disposition: inline", " folded", ":", "--") + nl())
		case 5, 6:
			m.WriteString(nl())
		}
	}
	return []byte(m.String())
}

// agreesWithEnmime returns an error if p's pre-scan accepts raw but enmime
// finds more parts or deeper nesting in it than p's limits allow.
func agreesWithEnmime(p *Parser, raw []byte) error {
	if p.prescan(raw) != nil {
		return nil
	}
	root, err := p.mime.ReadParts(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	parts, depth := shape(root)
	if parts > p.cfg.MaxParts || depth > p.cfg.MaxDepth {
		return fmt.Errorf("pre-scan accepted a message with %d parts and depth %d (limits %d, %d)",
			parts, depth, p.cfg.MaxParts, p.cfg.MaxDepth)
	}
	return nil
}

// shape returns the number of parts below root and the deepest nesting of
// multipart containers in enmime's tree.
func shape(root *enmime.Part) (parts, depth int) {
	var walk func(p *enmime.Part, d int)
	walk = func(p *enmime.Part, d int) {
		if isContainer(p) {
			d++
		}
		depth = max(depth, d)
		for c := p.FirstChild; c != nil; c = c.NextSibling {
			parts++
			walk(c, d)
		}
	}
	walk(root, 0)
	return parts, depth
}

// FuzzParse checks the invariants of Parse on any input: it does not panic,
// every field is valid UTF-8 within its bound, from and subject hold no
// control characters, a failed message has no bodies, the HTML holds
// nothing executable and is stable under Sanitize, and the pre-scan never
// accepts what enmime then finds too large. Small limits let the fuzzer
// reach them. Run it with
//
//	go test ./ingest -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/mime/*.eml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{
		flat(9), nested(4), closedSiblings(3), unclosedSiblings(3),
		// a delimiter inside a preamble line, which enmime accepts
		"Content-Type: multipart/mixed; boundary=b\r\n\r\nx --b \r\nContent-Type: text/plain\r\n\r\nhi\r\n--b--\r\n",
		// a part header cut by the next delimiter, with no blank line
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/mixed; boundary=c\r\n--b\r\n\r\n--c\r\n\r\nx\r\n--b--\r\n",
		// bare CR line breaks and a CR before a delimiter
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\rContent-Type: text/html\r\r<b>x</b>\rX--b \n--b--\n",
		// RFC 2231 continued boundary and an HTML part with script
		"Content-Type: multipart/alternative; boundary*0=a; boundary*1=b\n\n--ab\nContent-Type: text/html\n\n<script>x</script><a href=javascript:x>y</a>\n--ab--\n",
		"From: =?utf-8?b?w7w=?= <a@b>\nSubject: =?iso-2022-jp?b?GyRCJUYlOSVIGyhC?=\n\nx",
	} {
		f.Add([]byte(s))
	}
	p := NewParser(ParserConfig{MaxParts: 8, MaxDepth: 3, MaxHeaderBytes: 1024, MaxFieldRunes: 40, MaxBodyBytes: 2048})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m := p.Parse(raw)
		if m.Status != storage.StatusReady && m.Status != storage.StatusFailed {
			t.Fatalf("Status = %q", m.Status)
		}
		for name, v := range map[string]string{"From": m.From, "Subject": m.Subject, "Text": m.Text, "HTML": m.HTML} {
			if !utf8.ValidString(v) {
				t.Fatalf("%s is not valid UTF-8: %q", name, v)
			}
		}
		for name, v := range map[string]string{"From": m.From, "Subject": m.Subject} {
			if n := utf8.RuneCountInString(v); n > p.cfg.MaxFieldRunes {
				t.Fatalf("%s has %d runes, want <= %d", name, n, p.cfg.MaxFieldRunes)
			}
			if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
				t.Fatalf("%s holds a control character: %q", name, v)
			}
			if v != strings.TrimSpace(v) {
				t.Fatalf("%s is not trimmed: %q", name, v)
			}
		}
		if len(m.Text) > p.cfg.MaxBodyBytes || len(m.HTML) > p.cfg.MaxBodyBytes {
			t.Fatalf("bodies of %d and %d bytes, want <= %d", len(m.Text), len(m.HTML), p.cfg.MaxBodyBytes)
		}
		if strings.ContainsRune(m.Text, '\r') {
			t.Fatalf("Text holds CR: %q", m.Text)
		}
		if m.Status == storage.StatusFailed && (m.Text != "" || m.HTML != "") {
			t.Fatalf("failed message has bodies")
		}
		if err := checkHTML(m.HTML, true); err != nil {
			t.Fatalf("HTML not safe: %v\n%q", err, m.HTML)
		}
		if again := p.Sanitize(m.HTML); again != m.HTML {
			t.Fatalf("HTML not stable under Sanitize:\n once %q\ntwice %q", m.HTML, again)
		}
		if err := agreesWithEnmime(p, raw); err != nil {
			t.Fatal(err)
		}
	})
}

// isContainer reports whether enmime read p's body as multipart: the top
// level when it is multipart/* with a boundary, any other part with a
// boundary unless it is text/plain or text/html (enmime's rules).
func isContainer(p *enmime.Part) bool {
	if p.Boundary == "" {
		return false
	}
	if p.Parent == nil {
		return strings.HasPrefix(p.ContentType, "multipart/")
	}
	return p.ContentType != "text/plain" && p.ContentType != "text/html"
}

func BenchmarkParse(b *testing.B) {
	p := NewParser(ParserConfig{})
	for _, size := range []int{2 << 10, 50 << 10, 1 << 20} {
		raw := benchMessage(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if m := p.Parse(raw); m.Status != storage.StatusReady {
					b.Fatalf("Status = %q", m.Status)
				}
			}
		})
	}
}

// BenchmarkParseD is scenario D's message (bench/internal/load): a 2 KiB
// multipart/alternative that takes the simple path, and the same message
// through the general path (pre-scan and enmime) for comparison.
func BenchmarkParseD(b *testing.B) {
	p := NewParser(ParserConfig{})
	raw := loadMessage()
	b.Run("simple", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Parse(raw)
		}
	})
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if t, h, err := p.mimeBodies(raw, time.Time{}); err == nil {
				p.finish(t, h, time.Time{})
			}
			p.headerFields(raw)
		}
	})
}

func BenchmarkParseBomb(b *testing.B) {
	p := NewParser(ParserConfig{})
	for _, bomb := range bombs {
		b.Run(bomb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bomb.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if m := p.Parse(bomb.raw); m.Status != storage.StatusFailed {
					b.Fatalf("Status = %q", m.Status)
				}
			}
		})
	}
}

// benchMessage builds a typical newsletter of about size bytes:
// multipart/alternative with a quoted-printable text part and an HTML part
// of tables, links, inline styles and a tracking pixel, both growing with
// size.
func benchMessage(size int) []byte {
	var text, html strings.Builder
	html.WriteString(`<html><head><style>td{color:red}</style></head><body><table width="600" cellpadding="0" style="border-collapse: collapse">`)
	for i := 0; text.Len()+html.Len() < size-600; i++ {
		fmt.Fprintf(&text, "Item %d: Grüße aus Köln, a much better offer than last week. https://shop.example/item/%d\r\n", i, i)
		fmt.Fprintf(&html, `<tr><td style="padding: 8px; color: #333333; font-family: Arial, sans-serif">Item %d: <b>Grüße</b> aus Köln, a much better offer than last week. <a href="https://shop.example/item/%d?utm_source=mail" onclick="track()">Buy</a></td></tr>`+"\r\n", i, i)
	}
	html.WriteString(`</table><img src="https://track.example/p.gif" width="1" height="1"></body></html>`)
	return []byte("From: Shop <news@shop.example>\r\nTo: x@mayfly.test\r\nSubject: =?utf-8?q?Gr=C3=BC=C3=9Fe?= from the shop\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/alternative; boundary=\"bench\"\r\n\r\n" +
		"--bench\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + text.String() +
		"--bench\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + html.String() + "\r\n--bench--\r\n")
}

package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/inbucket/html2text"
	"github.com/jhillyerd/enmime/v2"
	"github.com/jhillyerd/enmime/v2/mediatype"
	"github.com/microcosm-cc/bluemonday"

	"github.com/mayfly/mayfly/storage"
)

// Reasons a message is stored as failed. Parse returns none of them (a bad
// message is still delivered, with status failed); the server logs and
// counts the reason (failReason), and the package's tests name the cause.
var (
	errTooManyParts     = errors.New("ingest: too many MIME parts")
	errTooDeep          = errors.New("ingest: MIME parts nested too deep")
	errHeaderTooLarge   = errors.New("ingest: MIME header section too large")
	errAmbiguousHeader  = errors.New("ingest: MIME part header ambiguous")
	errBoundaryTooLong  = errors.New("ingest: MIME boundary too long")
	errMediaTypeTooLong = errors.New("ingest: MIME Content-Type or Content-Disposition too long")
	errTooComplex       = errors.New("ingest: MIME structure too costly to pre-scan")
	errUnparsable       = errors.New("ingest: message cannot be parsed")
	errParseTimeout     = errors.New("ingest: parse took longer than its deadline")
	errParserPanic      = errors.New("ingest: parser panicked")
)

// failReasons are the reason labels of failed messages, a fixed set: the
// metric mayfly_smtp_failed_messages_total and the log use them. Anything
// else (which the parser does not return) is "other".
var failReasons = []struct {
	err    error
	reason string
}{
	{errTooManyParts, "too_many_parts"},
	{errTooDeep, "too_deep"},
	{errHeaderTooLarge, "header_too_large"},
	{errAmbiguousHeader, "ambiguous_header"},
	{errBoundaryTooLong, "boundary_too_long"},
	{errMediaTypeTooLong, "media_type_too_long"},
	{errTooComplex, "too_complex"}, // the pre-scan's work bound: part headers read over and over (see scanBudget)
	{errUnparsable, "unparsable"},  // enmime refused it: no header section, a malformed header line, an mbox "From " line...
	{errParseTimeout, "timeout"},   // MaxParseTime passed: enmime or the HTML sanitizer was still reading
	{errParserPanic, "panic"},
}

// failReason is the label of why a message failed. Only the label is ever
// logged: the wrapped error of enmime can quote a line of the message.
func failReason(err error) string {
	for _, r := range failReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "other"
}

// Defaults of ParserConfig, used for its zero fields.
const (
	DefaultMaxParts          = 100
	DefaultMaxDepth          = 10
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxFieldRunes     = 512
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxDataImageBytes = 64 << 10
	DefaultMaxParseTime      = 10 * time.Second
)

const (
	// maxBoundaryLen bounds a multipart boundary. RFC 2046 allows 70
	// characters; enmime peeks through a 4 KiB buffer and cannot find
	// delimiters longer than that, which would break the pre-scan's model.
	maxBoundaryLen = 256
	// maxHeaderCuts bounds how many delimiter-like lines one part header may
	// contain before the pre-scan gives up on it (see mimeScan.declare).
	maxHeaderCuts = 8
	// maxMediaTypeBytes and maxMediaTypeParams bound the Content-Type and
	// Content-Disposition of every part. enmime repairs their parameters in
	// time quadratic in the parameter count (3,000 RFC 2231 continuations
	// take 120 ms) and does so several times per part; real ones have a
	// handful of parameters.
	maxMediaTypeBytes  = 8 << 10
	maxMediaTypeParams = 64
	// partStartWindow covers enmime's first read of a part, during which it
	// looks for a delimiter at every byte: one 4 KiB buffer fill, doubled
	// for margin.
	partStartWindow = 8 << 10
	// scanWorkPerByte and scanWorkSlack make the pre-scan's work bound (see
	// scanBudget): a message of n bytes may cost it scanWorkPerByte·n +
	// scanWorkSlack units (see costCompare) on its part headers. A part
	// header read once costs about 18 units a byte, so part headers of up to
	// 230 KiB plus 44 % of the message pass, and the golden corpus spends at
	// most 1 % of its budget: the bound refuses part headers read over and
	// over (parts that start inside the header of the part before), full of
	// places where a part could end at the deepest nesting, or a message made
	// mostly of part headers.
	scanWorkPerByte = 8
	scanWorkSlack   = 4 << 20
)

// ParserConfig bounds what Parse accepts and keeps. Zero fields mean the
// documented defaults.
type ParserConfig struct {
	// MaxParts bounds the MIME parts below the top level (every part of every
	// multipart, nested ones included); more makes the message failed.
	// Default 100.
	MaxParts int
	// MaxDepth bounds the nesting of multipart containers: a plain message
	// has depth 0, multipart/mixed containing multipart/alternative has 2.
	// Deeper makes the message failed. Default 10. Do not raise it much:
	// enmime's cost grows exponentially with depth (20 levels take 0.2 s on
	// 700 bytes, 50 levels do not finish), while at 10 the worst structure
	// measured takes 3 ms.
	MaxDepth int
	// MaxHeaderBytes bounds the header section of the message and of each
	// part, blank line included; larger makes the message failed. Default 64 KiB.
	MaxHeaderBytes int
	// MaxFieldRunes bounds from and subject; longer values are cut. Default 512.
	MaxFieldRunes int
	// MaxBodyBytes bounds text_body and html_body each; longer bodies are cut
	// (HTML between tags, then sanitized again) and end with a visible mark,
	// "[… cut by Mayfly at 1 MiB]" (textCutMark, htmlCutMark), within the
	// bound. Default 1 MiB.
	MaxBodyBytes int
	// RemoteImages keeps https images in html_body
	// (MAYFLY_HTML_REMOTE_IMAGES=allow). By default remote images are removed.
	RemoteImages bool
	// MaxDataImageBytes bounds an inline data:image URI; larger ones are
	// removed. Default 64 KiB.
	MaxDataImageBytes int
	// MaxParseTime bounds the wall-clock time of one Parse, a backstop
	// behind the limits above, which bound the work but not how long it
	// takes: enmime and the HTML sanitizer read their input through a
	// reader that stops them once the time is up (deadlineReader), and the
	// message is then failed (timeout). Their cost is linear in the
	// message but not small: a 10 MiB text part ten containers deep costs
	// enmime 1.8 s of CPU, a 10 MiB HTML body the sanitizer 1.4 s, where a
	// 10 MiB attachment takes 0.1 s (BenchmarkParseWorst's shapes). Being
	// wall-clock time, it fails such a message sooner on a loaded node:
	// the default, 10 s, is five times the costliest legitimate shape's CPU
	// time, so a node that busy still parses it, and a hostile one still
	// holds a parse slot for at most that long (it held one 4.6-16 s).
	// Default 10 s.
	MaxParseTime time.Duration
}

func (c ParserConfig) withDefaults() ParserConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxParts, DefaultMaxParts)
	def(&c.MaxDepth, DefaultMaxDepth)
	def(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	def(&c.MaxFieldRunes, DefaultMaxFieldRunes)
	def(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	def(&c.MaxDataImageBytes, DefaultMaxDataImageBytes)
	if c.MaxParseTime <= 0 {
		c.MaxParseTime = DefaultMaxParseTime
	}
	return c
}

// Parser turns raw messages into what storage keeps. It is safe for
// concurrent use; build one per process, since the HTML policy is built once.
type Parser struct {
	cfg    ParserConfig
	policy *bluemonday.Policy
	mime   *enmime.Parser
}

// NewParser returns a Parser with cfg's limits.
func NewParser(cfg ParserConfig) *Parser {
	cfg = cfg.withDefaults()
	return &Parser{
		cfg:    cfg,
		policy: newPolicy(cfg.RemoteImages, cfg.MaxDataImageBytes),
		mime: enmime.NewParser(
			// A broken nested part is recorded in the part's errors and skipped;
			// the rest of the message is still shown.
			enmime.SkipMalformedParts(true),
			// multipart/* without a boundary is shown as text rather than failed.
			enmime.MultipartWOBoundaryAsSinglePart(true),
			// Corrupt base64 in a text part keeps what decoded.
			enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
			// Nobody reads the errors beyond the first few; keep memory flat.
			enmime.MaxStoredPartErrors(8),
			// A declared charset is trusted, as mail clients do; enmime only
			// guesses (chardet, a third of the parse time otherwise) when none
			// is declared.
			enmime.DisableCharacterDetection(true),
			// Text is derived from the sanitized HTML instead (see bodies).
			enmime.DisableTextConversion(true),
			enmime.SetCustomParseMediaType(parseMediaType),
		),
	}
}

// Parse parses a raw RFC 5322 message. It never fails and never panics: a
// message that cannot be parsed, or that exceeds the configured limits (the
// pre-scan's work bound and MaxParseTime included), comes back with
// StatusFailed, empty bodies and From and Subject as far as the
// top-level header could be read. Otherwise the status is StatusReady.
// Parse never returns StatusPending.
//
// enmime records recoverable problems (a boundary that is never closed, a
// malformed header line, corrupt base64, an unknown charset) in
// Envelope.Errors and still returns the parts it found; such a message is
// ready with whatever text it yielded. Only an error returned by enmime
// itself (for example a top-level header it cannot read) makes it failed.
//
// Attachments are not kept. An attached message (message/rfc822) is an
// attachment like any other: its text is not merged into the bodies, because
// its From, Subject and body belong to another message and the API has no
// field to show them as such.
func (p *Parser) Parse(raw []byte) storage.NewMessage {
	msg, _ := p.parse(raw)
	return msg
}

// parse is Parse, and also says why a failed message failed (nil when it is
// ready).
func (p *Parser) parse(raw []byte) (msg storage.NewMessage, why error) {
	return p.parseUntil(raw, time.Now().Add(p.cfg.MaxParseTime))
}

// parseUntil is parse with the deadline given.
func (p *Parser) parseUntil(raw []byte, until time.Time) (msg storage.NewMessage, why error) {
	msg.Status = storage.StatusFailed
	defer func() {
		if r := recover(); r != nil {
			msg = storage.NewMessage{From: msg.From, Subject: msg.Subject, Status: storage.StatusFailed}
			why = errParserPanic
			if r == errParseTimeout { // deadlineReader's
				why = errParseTimeout
			}
		}
	}()
	msg.From, msg.Subject = p.headerFields(raw)
	// html_body gives up the room of from and subject, so that the message
	// fits storage's default MAYFLY_MESSAGE_MAX_BYTES (2 MiB, two bodies'
	// worth) whole: storage would cut the HTML without regard for tags or
	// the cut's mark.
	text, html, err := p.bodies(raw, p.cfg.MaxBodyBytes-len(msg.From)-len(msg.Subject), until)
	if err != nil {
		return msg, err
	}
	msg.Text, msg.HTML, msg.Status = text, html, storage.StatusReady
	return msg, nil
}

// bodies returns the text and sanitized HTML bodies of raw, or why there are
// none. A simple message takes the simple path (simple.go), any other the
// general one; both hand the decoded text and raw HTML to finish. enmime and
// the sanitizer read through a deadlineReader, which stops them at until;
// the rest is linear and fast (the simple path, html2text and cleanText on
// bounded bodies).
// htmlMax bounds the HTML body (at most MaxBodyBytes).
func (p *Parser) bodies(raw []byte, htmlMax int, until time.Time) (text, html string, err error) {
	text, html, ok := p.simpleBodies(raw)
	if !ok {
		if text, html, err = p.mimeBodies(raw, until); err != nil {
			return "", "", err
		}
	}
	text, html = p.finishWithin(text, html, htmlMax, until)
	return text, html, nil
}

// finish sanitizes the HTML body and cleans the text body, deriving the
// text from the sanitized HTML when the message has none.
func (p *Parser) finish(text, html string, until time.Time) (string, string) {
	return p.finishWithin(text, html, p.cfg.MaxBodyBytes, until)
}

// finishWithin is finish with the HTML body bounded by htmlMax.
func (p *Parser) finishWithin(text, html string, htmlMax int, until time.Time) (string, string) {
	if html != "" {
		html = p.sanitizeBounded(html, min(htmlMax, p.cfg.MaxBodyBytes), htmlCutMark(p.cfg.MaxBodyBytes), until)
	}
	if text == "" && html != "" {
		// Derived from the sanitized HTML rather than the raw one (as enmime
		// would), so the text shows the links the HTML keeps and not the
		// javascript: or tracking URLs it dropped.
		var err error
		if text, err = html2text.FromString(html); err != nil {
			text = ""
		}
	}
	return boundText(text, p.cfg.MaxBodyBytes), html
}

// mimeBodies is the general path: the pre-scan, then enmime. It returns the
// decoded text and raw HTML.
func (p *Parser) mimeBodies(raw []byte, until time.Time) (text, html string, err error) {
	if err := p.prescan(raw); err != nil {
		return "", "", err
	}
	env, err := p.mime.ReadEnvelope(deadlineReader{r: bytes.NewReader(raw), until: until})
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", errUnparsable, err)
	}
	return env.Text, env.HTML, nil
}

// deadlineReader reads r until the time until (none when zero), then
// panics with errParseTimeout, which parseUntil recovers. enmime reads its
// input through a 4 KiB buffer as it parses, and the sanitizer's tokenizer
// as it tokenizes, so either stops within a few KiB of work after the
// deadline; neither takes a context. It panics rather than failing the
// read because enmime does not stop on a read error: its boundary reader
// retries a failed peek at every byte of every nesting level, which took
// longer than the parse it interrupted (4-5 s after a deadline at 0.1 s
// on a 10 MiB message ten containers deep). Neither enmime nor bluemonday
// recovers panics or reads from another goroutine.
type deadlineReader struct {
	r     io.Reader
	until time.Time
}

func (d deadlineReader) Read(b []byte) (int, error) {
	if !d.until.IsZero() && time.Now().After(d.until) {
		panic(errParseTimeout)
	}
	return d.r.Read(b)
}

// parseMediaType is enmime's media type parser, except that a US-ASCII
// charset counts as none. enmime decodes US-ASCII as Windows-1252, which
// turns the raw UTF-8 that scripts send without (or with default) MIME
// headers into mojibake; with no charset, enmime detects it (long texts) or
// keeps the bytes (short ones), and 7-bit text reads the same either way.
func parseMediaType(ctype string) (string, map[string]string, []string, error) {
	mtype, params, invalid, err := mediatype.Parse(ctype)
	if cs := params["charset"]; strings.EqualFold(cs, "us-ascii") || strings.EqualFold(cs, "ascii") {
		delete(params, "charset")
	}
	return mtype, params, invalid, err
}

// headerReader is a bufio.Reader over a header block, pooled: a header
// read allocated bufio's 4 KiB buffer, three or four times a message (16
// of the 38 KiB a 2 KiB multipart message cost the simple path). The size
// stays bufio's default, the one every read was written and tested with.
type headerReader struct {
	src bytes.Reader
	buf *bufio.Reader
}

var headerReaders = sync.Pool{New: func() any {
	hr := new(headerReader)
	hr.buf = bufio.NewReader(&hr.src)
	return hr
}}

// withHeaderReader runs read with a reader of block, which read must not
// keep: the reader goes back to the pool when read returns.
func withHeaderReader[T any](block []byte, read func(*bufio.Reader) (T, error)) (T, error) {
	hr := headerReaders.Get().(*headerReader)
	defer headerReaders.Put(hr)
	hr.src.Reset(block)
	hr.buf.Reset(&hr.src)
	return read(hr.buf)
}

// readHeader is enmime's header reader on block, errors discarded.
func readHeader(block []byte) (textproto.MIMEHeader, error) {
	return withHeaderReader(block, func(r *bufio.Reader) (textproto.MIMEHeader, error) {
		return enmime.ReadHeader(r, discardMIMEErrors{})
	})
}

// headerFields returns the display From and Subject of raw's top-level
// header. They are read from the header alone, so a message whose body
// cannot be parsed still shows who sent it and what about.
func (p *Parser) headerFields(raw []byte) (from, subject string) {
	block := raw[:headerSectionEnd(raw, 0, min(len(raw), p.cfg.MaxHeaderBytes+1))]
	if len(block) > p.cfg.MaxHeaderBytes {
		block = block[:p.cfg.MaxHeaderBytes]
		if nl := bytes.LastIndexByte(block, '\n'); nl >= 0 {
			block = block[:nl+1]
		}
	}
	h, err := readHeader(block)
	if err != nil {
		// The only error ReadHeader returns for a readable buffer is a first
		// line starting with white space; read on without it.
		block = bytes.TrimLeft(block, " \t")
		if nl := bytes.IndexByte(block, '\n'); nl >= 0 {
			block = block[nl+1:]
		}
		h, _ = readHeader(block)
	}
	// An envelope made of these two fields decodes them exactly as enmime
	// decodes a full message (RFC 2047 words in any charset enmime knows).
	part := enmime.NewPart("")
	part.Header = textproto.MIMEHeader{"From": h["From"], "Subject": h["Subject"]}
	env, err := enmime.EnvelopeFromPart(part)
	if err != nil {
		return "", ""
	}
	return cleanField(displayFrom(env), p.cfg.MaxFieldRunes),
		cleanField(env.GetHeader("Subject"), p.cfg.MaxFieldRunes)
}

// displayFrom formats the From header for display: "Name <addr>", the bare
// address when there is no name, several joined by ", ", and the decoded
// header text when it does not parse as addresses.
func displayFrom(env *enmime.Envelope) string {
	list, err := env.AddressList("From")
	if err != nil || len(list) == 0 {
		return env.GetHeader("From")
	}
	parts := make([]string, 0, len(list))
	for _, a := range list {
		name := strings.TrimSpace(a.Name)
		switch {
		case name == "" || name == a.Address:
			parts = append(parts, a.Address)
		case a.Address == "":
			parts = append(parts, name)
		default:
			parts = append(parts, name+" <"+a.Address+">")
		}
	}
	return strings.Join(parts, ", ")
}

type discardMIMEErrors struct{}

func (discardMIMEErrors) AddError(string, string, ...any)   {}
func (discardMIMEErrors) AddWarning(string, string, ...any) {}

// The pre-scan.
//
// enmime puts no bound on the number of parts, the nesting depth or the size
// of part headers, and its cost grows with all three: every part gets its own
// buffers, every level of nesting filters each byte below it again, and the
// end of a part costs more the deeper it is (20,000 tiny parts take 1 s and
// 190 MiB; 50 levels of nesting do not finish). prescan walks the raw bytes
// before enmime does and refuses a message whose structure could exceed the
// limits, so a MIME bomb costs one linear scan.
//
// The scan is deliberately conservative rather than an exact MIME parser: it
// must never see fewer parts, less depth or smaller headers than enmime will.
// enmime is lenient about where a delimiter may appear, so:
//
//   - a part may start after any line that contains "--boundary" followed by
//     white space, anywhere in the line, for any boundary that may be open
//     (enmime accepts delimiters inside a line in a preamble);
//   - a part header is read from that point to the first blank line, and is
//     also read as if cut at every point where enmime might end the part
//     (see stopsAt), so a Content-Type that enmime sees is seen here too;
//   - every boundary found in any of those readings opens a container, using
//     enmime's own header reader and media type parser;
//   - a container is closed only by a line in its body that starts with
//     "--boundary--", which enmime cannot miss, and nothing else is closed
//     with it.
//
// Depth is the number of containers that may be open at once. On well-formed
// mail the counts are exact; malformed mail (a multipart never terminated,
// delimiter-like text) may be over-counted, and then it is stored as failed.
// TestPrescanRandomMIME and FuzzPrescan check the claim against enmime.
//
// The line walk is linear: each line is compared once with each open
// container (at most MaxDepth). The part headers are not: each is read from
// its delimiter line to its blank line, and a part may start inside the
// header of the part before, so one region of the message can be read once
// per part (up to MaxParts times MaxHeaderBytes, 6.4 MiB, for a message of
// 64 KiB); in each reading, every place where enmime might end the part is
// compared with every open boundary, and each place it would is another
// reading of the header. So the part headers' work is counted (scanBudget)
// and bounded in proportion to the message's size: past the bound the
// message is failed (too_complex). TestParseScanWork and
// BenchmarkParseWorst show the shapes and their cost.

// openBoundary is a multipart container that may still be open.
type openBoundary struct {
	delim []byte // "--" + boundary
	term  []byte // "--" + boundary + "--"
	body  int    // where its body starts: no earlier line can close it
}

type mimeScan struct {
	raw   []byte
	cfg   *ParserConfig
	open  []openBoundary
	parts int
	work  int // units spent on part headers so far (see spend)
}

// Costs of the pre-scan's part header work, in units of what looking at one
// byte costs (about 2 ns): a comparison with one open boundary (a function
// call and a short compare) costs 16, a reading of a header by enmime's
// header reader 16 a byte (short header lines cost it 22-28 ns a byte, one
// long line 2 ns) and 1,024 a call (its buffers).
const (
	costCompare      = 16
	costHeaderByte   = 16
	costHeaderReader = 1024
)

// scanBudget is the work the pre-scan may spend on the part headers of a
// message of n bytes.
func scanBudget(n int) int { return scanWorkPerByte*n + scanWorkSlack }

// spend counts n units of work and fails once the budget is spent.
func (s *mimeScan) spend(n int) error {
	if s.work += n; s.work > scanBudget(len(s.raw)) {
		return errTooComplex
	}
	return nil
}

// prescan reports whether raw stays within p's limits, without parsing it.
func (p *Parser) prescan(raw []byte) error {
	s := mimeScan{raw: raw, cfg: &p.cfg}
	end, err := s.headerBlock(0)
	if err != nil {
		return err
	}
	if err := s.declare(0, end); err != nil {
		return err
	}
	// The top-level header is read once, however large (MaxHeaderBytes
	// bounds it; a long Received chain is ordinary): only part headers count.
	s.work = 0
	for pos := end; pos < len(raw) && len(s.open) > 0; {
		next := nextLine(raw, pos, len(raw))
		line := raw[pos:next]
		if bytes.Contains(line, mimeDashes) {
			closed := s.closedBy(line, pos)
			if s.startsPart(line) {
				s.parts++
				if s.parts > s.cfg.MaxParts {
					return errTooManyParts
				}
				hend, err := s.headerBlock(next)
				if err != nil {
					return err
				}
				if err := s.declare(next, hend); err != nil {
					return err
				}
			}
			if closed >= 0 {
				s.open = slices.Delete(s.open, closed, closed+1)
			}
		}
		pos = next
	}
	return nil
}

var mimeDashes = []byte("--")

// headerBlock returns the end of the header section starting at start: just
// past its blank line, or the end of raw.
func (s *mimeScan) headerBlock(start int) (int, error) {
	limit := min(len(s.raw), start+s.cfg.MaxHeaderBytes+1)
	end := headerSectionEnd(s.raw, start, limit)
	if end-start > s.cfg.MaxHeaderBytes {
		return 0, errHeaderTooLarge
	}
	return end, s.spend(end - start)
}

// declare reads the part header raw[start:end] the ways enmime may read it
// and opens a container for every boundary found.
func (s *mimeScan) declare(start, end int) error {
	cuts := []int{end}
	for q := start; q < end && len(s.open) > 0; q++ {
		stop, compared := s.stopsAt(q, q-start < partStartWindow)
		if err := s.spend(1 + compared*costCompare); err != nil {
			return err
		}
		if stop {
			if len(cuts) > maxHeaderCuts {
				return errAmbiguousHeader
			}
			cuts = append(cuts, q)
		}
	}
	var seen []string
	for _, c := range cuts {
		if err := s.spend(costHeaderReader + (c-start)*costHeaderByte); err != nil {
			return err
		}
		b, err := headerBoundary(s.raw[start:c])
		if err != nil {
			return err
		}
		if b == "" || slices.Contains(seen, b) {
			continue
		}
		if len(b) > maxBoundaryLen {
			return errBoundaryTooLong
		}
		seen = append(seen, b)
		s.open = append(s.open, openBoundary{delim: []byte("--" + b), term: []byte("--" + b + "--"), body: end})
		if len(s.open) > s.cfg.MaxDepth {
			return errTooDeep
		}
	}
	return nil
}

// headerBoundary returns the boundary parameter enmime would find in a part
// header, or "". It uses enmime's header reader and media type parser so the
// answer matches what enmime decides, quirks included. It fails if a media
// type enmime would parse is too long for its parser.
func headerBoundary(header []byte) (string, error) {
	h, err := readHeader(header)
	if err != nil {
		return "", nil // enmime drops a part whose header it cannot read
	}
	for _, name := range [...]string{"Content-Type", "Content-Disposition"} {
		if v := h.Get(name); len(v) > maxMediaTypeBytes || strings.Count(v, ";") > maxMediaTypeParams {
			return "", errMediaTypeTooLong
		}
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return "", nil
	}
	_, params, _, err := parseMediaType(ct)
	if err != nil {
		return "", nil
	}
	return params["boundary"], nil
}

// stopsAt reports whether enmime's boundary reader may end a part at raw[q]
// for one of the open boundaries, and how many open boundaries it compared.
// It mirrors boundaryReader.Read: at a CR or LF it peeks past the line break
// (two bytes for CR, one for LF) at a window as long as the delimiter plus
// one byte, and stops on a delimiter followed by white space or on a
// terminator in that window. During the first read of a part (atPartStart;
// enmime's flag stays set for a whole buffer fill) it peeks like that at
// every byte, with no line break to skip. enmime peeks at the part's stream,
// which may end sooner than raw; more data here can only find more stops.
func (s *mimeScan) stopsAt(q int, atPartStart bool) (stop bool, compared int) {
	pad := 0
	switch s.raw[q] {
	case '\n':
		pad = 1
	case '\r':
		pad = 2
	default:
		if !atPartStart {
			return false, 0
		}
	}
	rest := s.raw[q:]
	// The window is two bytes longer than "--boundary", and a delimiter
	// must be followed by white space inside it: a delimiter can only start
	// at the window's first or second byte, and a terminator (two bytes
	// longer) only at its first. Either way the second byte is a dash.
	if len(rest) < pad+2 || rest[pad+1] != '-' {
		return false, 0
	}
	// enmime skips a window that starts "\n\n", "\n\r", "\r\n\r" or
	// "\r\n\n".
	if pad == 1 && (rest[1] == '\n' || rest[1] == '\r') ||
		pad == 2 && rest[1] == '\n' && (rest[2] == '\r' || rest[2] == '\n') {
		return false, 0
	}
	for _, c := range s.open {
		n := len(c.delim) + 2 + pad
		if len(rest) < n {
			continue
		}
		compared++
		peek := rest[pad:n]
		if isDelimiter(peek, c.delim) || bytes.Contains(peek, c.term) {
			return true, compared
		}
	}
	return false, compared
}

// isDelimiter mirrors enmime's test: the first occurrence of delim in buf is
// followed by white space.
func isDelimiter(buf, delim []byte) bool {
	i := bytes.Index(buf, delim)
	return i >= 0 && i+len(delim) < len(buf) && unicode.IsSpace(rune(buf[i+len(delim)]))
}

// startsPart reports whether enmime may start a new part after line: some
// open boundary occurs in it followed by white space, and the line is not
// that boundary's terminator.
func (s *mimeScan) startsPart(line []byte) bool {
	for _, c := range s.open {
		if bytes.Contains(line, c.term) {
			continue
		}
		for i := 0; ; {
			j := bytes.Index(line[i:], c.delim)
			if j < 0 {
				break
			}
			k := i + j + len(c.delim)
			if k < len(line) && unicode.IsSpace(rune(line[k])) {
				return true
			}
			i += j + 1
		}
	}
	return false
}

// closedBy returns the index of the innermost open container that line,
// starting at pos, certainly closes (the line starts with its terminator and
// lies in the container's body), or -1.
func (s *mimeScan) closedBy(line []byte, pos int) int {
	for i := len(s.open) - 1; i >= 0; i-- {
		if pos >= s.open[i].body && bytes.HasPrefix(line, s.open[i].term) {
			return i
		}
	}
	return -1
}

// headerSectionEnd returns the index just past the first blank line ("\n" or
// "\r\n") at or after start, looking no further than limit; limit if there
// is none before it.
func headerSectionEnd(raw []byte, start, limit int) int {
	for pos := start; pos < limit; {
		next := nextLine(raw, pos, limit)
		if line := raw[pos:next]; len(line) <= 2 && (string(line) == "\n" || string(line) == "\r\n") {
			return next
		}
		pos = next
	}
	return limit
}

// lineEnd returns the index just past the LF ending the line at pos, or limit.
func nextLine(raw []byte, pos, limit int) int {
	if i := bytes.IndexByte(raw[pos:limit], '\n'); i >= 0 {
		return pos + i + 1
	}
	return limit
}

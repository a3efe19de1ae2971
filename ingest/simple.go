package ingest

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
	"unicode/utf8"
)

// The simple path.
//
// enmime is general and costs accordingly: for a 2 KiB multipart/alternative
// message, about 100 µs and 500 allocations, most of them reading headers a
// byte window at a time through its boundary reader. Most mail that reaches
// a temporary inbox is far simpler: one text or HTML part, or a
// multipart/alternative of one text and one HTML part, in UTF-8 or ASCII,
// unencoded or quoted-printable. simpleBodies reads exactly those shapes
// with the standard library and declines everything else, which then takes
// the general path (pre-scan and enmime) as before.
//
// It declines whenever enmime might read the message differently: any
// header or parameter it would have to repair, any transfer encoding or
// charset but the plainest, invalid UTF-8, a missing terminator, a nested
// or extra part, a delimiter-like line anywhere it does not expect one. For
// every message it does take it must give what enmime gives: TestSimplePath
// checks that on the golden corpus and on generated variants, and FuzzSimple
// on arbitrary input.

// simpleBodies returns the decoded text and raw HTML of raw when it is one of
// the simple shapes; ok is false otherwise (nothing is decided then).
func (p *Parser) simpleBodies(raw []byte) (text, html string, ok bool) {
	if !crlfOnly(raw) {
		return "", "", false
	}
	hdr, body, ok := p.splitHeader(raw)
	if !ok {
		return "", "", false
	}
	ctype, params, ok := simpleMediaType(hdr)
	if !ok {
		return "", "", false
	}
	switch ctype {
	case "text/plain", "text/html":
		content, ok := simpleContent(hdr, params, body)
		if !ok {
			return "", "", false
		}
		if ctype == "text/plain" {
			return content, "", true
		}
		return "", content, true
	case "multipart/alternative":
		return p.simpleAlternative(params, body)
	}
	return "", "", false
}

// crlfOnly reports whether every line break of raw is CRLF (SMTP's, which
// go-smtp keeps): no bare LF or CR, which parsers split differently.
func crlfOnly(raw []byte) bool {
	for i := bytes.IndexByte(raw, '\n'); i >= 0; {
		if i == 0 || raw[i-1] != '\r' {
			return false
		}
		j := bytes.IndexByte(raw[i+1:], '\n')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return bytes.Count(raw, []byte("\r")) == bytes.Count(raw, []byte("\n"))
}

// splitHeader reads the header section at the start of raw (bounded by
// MaxHeaderBytes, as the pre-scan bounds it) with the standard library.
func (p *Parser) splitHeader(raw []byte) (textproto.MIMEHeader, []byte, bool) {
	end := headerSectionEnd(raw, 0, min(len(raw), p.cfg.MaxHeaderBytes+1))
	if end > p.cfg.MaxHeaderBytes || end == len(raw) && !bytes.HasSuffix(raw, []byte("\n\n")) && !bytes.HasSuffix(raw, []byte("\n\r\n")) {
		return nil, nil, false // too large, or no blank line ends it
	}
	block := raw[:end]
	// Anything enmime's lenient reader might repair: a folded first line,
	// a line that is not a "Name: value" field, bare CRs, NUL.
	if len(block) > 0 && (block[0] == ' ' || block[0] == '\t') || bytes.IndexByte(block, 0) >= 0 {
		return nil, nil, false
	}
	h, err := withHeaderReader(block, func(r *bufio.Reader) (textproto.MIMEHeader, error) {
		return textproto.NewReader(r).ReadMIMEHeader()
	})
	if err != nil && err != io.EOF {
		return nil, nil, false
	}
	return h, raw[end:], true
}

// simpleMediaType returns the Content-Type of a header when it is given at
// most once, parses cleanly and carries only the parameters this path
// understands. A missing Content-Type is text/plain, as for enmime.
func simpleMediaType(h textproto.MIMEHeader) (string, map[string]string, bool) {
	if len(h["Content-Disposition"]) > 0 || len(h["Content-Transfer-Encoding"]) > 1 {
		return "", nil, false
	}
	v := h["Content-Type"]
	switch len(v) {
	case 0:
		return "text/plain", map[string]string{}, true
	case 1:
	default:
		return "", nil, false
	}
	if strings.ContainsAny(v[0], "\"'\\*%") && !simpleQuoted(v[0]) {
		return "", nil, false // quoting or RFC 2231 forms enmime might repair
	}
	ctype, params, err := mime.ParseMediaType(v[0])
	if err != nil {
		return "", nil, false
	}
	for k := range params {
		if k != "charset" && k != "boundary" {
			return "", nil, false
		}
	}
	return ctype, params, true
}

// simpleQuoted accepts the one quoting real mail uses: double quotes around a
// parameter value with no escapes or other specials inside.
func simpleQuoted(v string) bool {
	if strings.ContainsAny(v, "'\\*%") || strings.Count(v, `"`)%2 != 0 {
		return false
	}
	for rest := v; ; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			return true
		}
		if i == 0 || rest[i-1] != '=' {
			return false
		}
		j := strings.IndexByte(rest[i+1:], '"')
		if strings.ContainsAny(rest[i+1:i+1+j], ";=") {
			return false
		}
		rest = rest[i+1+j+1:]
	}
}

// simpleContent decodes a text part's body: UTF-8 (or ASCII, or no charset)
// in 7bit, 8bit or quoted-printable, and valid UTF-8 once decoded.
func simpleContent(h textproto.MIMEHeader, params map[string]string, body []byte) (string, bool) {
	if _, ok := params["boundary"]; ok {
		return "", false
	}
	switch cs := strings.ToLower(params["charset"]); cs {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
	default:
		return "", false
	}
	switch cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); cte {
	case "", "7bit", "8bit":
	case "quoted-printable":
		if !simpleQP(body) {
			return "", false
		}
		dec, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			return "", false
		}
		body = dec
	default:
		return "", false
	}
	if !utf8.Valid(body) {
		return "", false
	}
	// With no charset declared, enmime guesses one (chardet) from the
	// content, even with DisableCharacterDetection: an ISO-2022 escape (ESC)
	// or any non-ASCII byte can make it read the text as another charset.
	if params["charset"] == "" && bytes.IndexFunc(body, func(r rune) bool { return r == 0x1b || r >= utf8.RuneSelf }) >= 0 {
		return "", false
	}
	return string(body), true
}

// simpleQP accepts quoted-printable that needs no repair: every "=" starts a
// soft line break or two upper-case hex digits.
func simpleQP(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '=' {
			continue
		}
		rest := b[i+1:]
		switch {
		case bytes.HasPrefix(rest, []byte("\r\n")), bytes.HasPrefix(rest, []byte("\n")):
		case len(rest) >= 2 && isUpperHex(rest[0]) && isUpperHex(rest[1]):
		default:
			return false
		}
	}
	return true
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

// simpleAlternative reads a multipart/alternative body of at most one
// text/plain and at most one text/html part, each a simple part.
func (p *Parser) simpleAlternative(params map[string]string, body []byte) (text, html string, ok bool) {
	boundary := params["boundary"]
	if boundary == "" || len(boundary) > 70 || params["charset"] != "" {
		return "", "", false
	}
	delim := []byte("--" + boundary)
	// Every line holding the delimiter must be exactly a delimiter line,
	// and the body must hold no other "--boundary"-like text for enmime
	// to find.
	var starts []int // where each part's header starts
	first := -1      // where the first delimiter line starts
	end := -1        // where the closing delimiter line starts
	for pos := 0; pos < len(body); {
		next := nextLine(body, pos, len(body))
		line := body[pos:next]
		if bytes.Contains(line, delim) {
			trimmed := bytes.TrimRight(line, "\r\n")
			switch {
			case end >= 0:
				return "", "", false // text after the end that mentions the boundary
			case bytes.Equal(trimmed, delim) && bytes.HasSuffix(line, []byte("\r\n")):
				if first < 0 {
					first = pos
				}
				starts = append(starts, next)
			case bytes.Equal(trimmed, append(delim, '-', '-')) && bytes.HasSuffix(line, []byte("\r\n")):
				end = pos
			default:
				return "", "", false
			}
		}
		pos = next
	}
	if end < 0 || len(starts) == 0 || len(starts) > 2 || bytes.Contains(body[:first], []byte("--")) {
		return "", "", false
	}
	var haveText, haveHTML bool
	for i, start := range starts {
		stop := end
		if i+1 < len(starts) {
			stop = starts[i+1] - len(delim) - 2
		}
		// The CRLF before a delimiter belongs to the delimiter.
		if stop-2 < start || string(body[stop-2:stop]) != "\r\n" {
			return "", "", false
		}
		part := body[start : stop-2]
		hdr, pbody, ok := p.splitHeader(part)
		if !ok || len(hdr["Content-Type"]) != 1 { // enmime does not default a part's type
			return "", "", false
		}
		ctype, pparams, ok := simpleMediaType(hdr)
		if !ok {
			return "", "", false
		}
		content, ok := simpleContent(hdr, pparams, pbody)
		if !ok {
			return "", "", false
		}
		switch {
		case ctype == "text/plain" && !haveText:
			text, haveText = content, true
		case ctype == "text/html" && !haveHTML:
			html, haveHTML = content, true
		default:
			return "", "", false
		}
	}
	return text, html, true
}

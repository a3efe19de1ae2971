package client

import (
	"html"
	"regexp"
	"strings"
)

// The helpers below are client-side only: the service extracts nothing.

// ws is white space for the helpers' words: Unicode's White_Space, the
// same set in the three clients (Go's \s lacks \v and the no-break space
// that &nbsp; gives).
const ws = `\t\n\v\f\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

var (
	textLinkRE = regexp.MustCompile(`(?i)https?://[^` + ws + `<>"'\x60]+`)
	hrefRE     = regexp.MustCompile(`(?i)(?:^|[ \t\n\f\r])href[ \t\n\f\r]*=[ \t\n\f\r]*(?:"([^"]*)"|'([^']*)'|([^ \t\n\f\r>"']+))`)
	// hiddenRE is what holds no text or link: comments, scripts, styles.
	hiddenRE = regexp.MustCompile(`(?is)<!--.*?-->|<script\b.*?</script\s*>|<style\b.*?</style\s*>`)
	tagRE    = regexp.MustCompile(`<[^>]*>`)
	// anchorRE is a tag with an href (group 1: its attributes) and, for an
	// <a>, the text up to its closing tag (group 2).
	anchorRE = regexp.MustCompile(`(?is)<(?:a\b([^>]*)>(.*?)</a\s*>|[a-z][a-z0-9]*\b([^>]*\bhref\s*=[^>]*)>)`)
	// entityRE is a character reference the helpers decode: a numeric one,
	// or a named one ended by its ";" (a link's "&region=eu" stays).
	entityRE = regexp.MustCompile(`&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*;)`)
	// DefaultCodePattern is Code's default: a run of 4 to 8 digits on word
	// boundaries.
	DefaultCodePattern = regexp.MustCompile(`\b\d{4,8}\b`)
)

// Links returns every http and https link of msg: those in text_body, then
// the hrefs of html_body, HTML-unescaped, in order of first appearance,
// each once. Trailing punctuation of a link in text (a full stop, a comma,
// a closing bracket without its opening one) is not part of it.
func Links(msg Message) []string {
	var out []string
	for _, l := range LinksWithText(msg) {
		out = append(out, l.URL)
	}
	return out
}

// Link is a link of a message and its text: the anchor's text for an href
// of html_body (tags removed, entities unescaped, white space collapsed),
// "" for a bare link in text_body that no <a> of html_body labels.
type Link struct {
	URL  string `json:"url"`
	Text string `json:"text"`
}

// LinksWithText returns the links of Links, in the same order and each
// once, with their text: follow "the link labelled Verify". A link found
// in both parts keeps its place (the text part's) and takes the text of
// its first <a> that has one, so in a text+HTML mail the link labelled
// "Verify your email" has that text.
func LinksWithText(msg Message) []Link {
	var out []Link
	at := map[string]int{} // a URL's place in out
	add := func(u, text string) {
		u = strings.TrimSpace(unescape(u))
		lower := strings.ToLower(u)
		if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
			return
		}
		if i, ok := at[u]; ok {
			// Its first place stays; the text is its first <a>'s that
			// has one (the text part's bare link has none).
			if out[i].Text == "" {
				out[i].Text = text
			}
			return
		}
		at[u] = len(out)
		out = append(out, Link{URL: u, Text: text})
	}
	for _, u := range textLinkRE.FindAllString(msg.TextBody, -1) {
		add(trimLink(u), "")
	}
	body := hiddenRE.ReplaceAllString(msg.HTMLBody, " ")
	for _, m := range anchorRE.FindAllStringSubmatchIndex(body, -1) {
		var attrs string
		switch {
		case m[2] >= 0:
			attrs = body[m[2]:m[3]]
		case m[6] >= 0: // a tag other than a closed <a>, with an href
			attrs = body[m[6]:m[7]]
		}
		href := hrefRE.FindStringSubmatch(attrs)
		if href == nil {
			continue
		}
		text := ""
		if m[4] >= 0 {
			text = strings.Join(strings.Fields(HTMLText(body[m[4]:m[5]])), " ")
		}
		add(href[1]+href[2]+href[3], text)
	}
	return out
}

// trimLink drops the punctuation that ends a sentence around a link.
func trimLink(u string) string {
	for len(u) > 0 {
		last := u[len(u)-1]
		switch {
		case strings.IndexByte(".,;:!?*", last) >= 0:
		case last == ')' && strings.Count(u, "(") < strings.Count(u, ")"):
		case last == ']' && strings.Count(u, "[") < strings.Count(u, "]"):
		case last == '}' && strings.Count(u, "{") < strings.Count(u, "}"):
		default:
			return u
		}
		u = u[:len(u)-1]
	}
	return u
}

// HTMLText is the text of an HTML body: comments, scripts, styles and
// tags removed (each as a space), character references decoded.
func HTMLText(body string) string {
	return unescape(tagRE.ReplaceAllString(hiddenRE.ReplaceAllString(body, " "), " "))
}

// unescape decodes the character references of s once: numeric ones, and
// named ones ended by ";" (HTML's whole table). A name without its ";" is
// left as it is, as a browser leaves "&region=eu" in an href.
func unescape(s string) string {
	return entityRE.ReplaceAllStringFunc(s, html.UnescapeString)
}

// Code returns the verification code of msg. It reads text_body, else the
// text of html_body, else the subject: the first of them with a run of 4
// to 8 digits. Without a pattern (nil) it prefers, in that text, the first
// run after a keyword (code, PIN, OTP, verification, one-time, passcode;
// any case) among the 3 words before it in its sentence; else the first run
// before a keyword among the 3 words after it in its sentence ("482913 is your code"); else the
// last 6-digit run; else the first run. So "Order #2026 placed 2026-11-24.
// Your verification code is 482913" gives 482913. With a pattern: its first
// match, or its first group's text when it has one. ok is false when
// nothing matches.
func Code(msg Message, pattern *regexp.Regexp) (code string, ok bool) {
	if pattern != nil {
		for _, s := range codeFields(msg) {
			m := pattern.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			if len(m) > 1 {
				return m[1], true
			}
			return m[0], true
		}
		return "", false
	}
	for _, s := range codeFields(msg) {
		runs := DefaultCodePattern.FindAllStringIndex(s, -1)
		if len(runs) == 0 {
			continue
		}
		for _, r := range runs {
			if keywordRE.MatchString(lastWords(s[:r[0]], 3)) {
				return s[r[0]:r[1]], true
			}
		}
		for _, r := range runs {
			if keywordRE.MatchString(firstWords(s[r[1]:], 3)) {
				return s[r[0]:r[1]], true
			}
		}
		for i := len(runs) - 1; i >= 0; i-- {
			if r := runs[i]; r[1]-r[0] == 6 {
				return s[r[0]:r[1]], true
			}
		}
		return s[runs[0][0]:runs[0][1]], true
	}
	return "", false
}

// Codes returns every run of 4 to 8 digits, in order, of the field Code
// reads (text_body, else the text of html_body, else the subject).
func Codes(msg Message) []string {
	for _, s := range codeFields(msg) {
		if runs := DefaultCodePattern.FindAllString(s, -1); len(runs) > 0 {
			return runs
		}
	}
	return nil
}

var keywordRE = regexp.MustCompile(`(?i)\b(code|pin|otp|verification|one-time|passcode)\b`)

func codeFields(msg Message) []string {
	return []string{msg.TextBody, HTMLText(msg.HTMLBody), msg.Subject}
}

// sentenceEndRE ends a sentence: a keyword is next to a run only within
// its sentence ("... your code. Order 2026" does not make 2026 the code).
// The text before a run ends at the run, which is no end of the field:
// there a full stop ends a sentence only with white space after it.
var (
	sentenceEndRE       = regexp.MustCompile(`[.!?]([` + ws + `]|$)`)
	sentenceEndBeforeRE = regexp.MustCompile(`[.!?][` + ws + `]`)
)

// lastWords is the last n white-space separated words of s's last
// sentence (s is the text before a run: its last word may be the part of
// the run's word before it, as "PIN:" in "PIN:1234").
func lastWords(s string, n int) string {
	if ends := sentenceEndBeforeRE.FindAllStringIndex(s, -1); len(ends) > 0 {
		s = s[ends[len(ends)-1][1]:]
	}
	f := strings.Fields(s)
	return strings.Join(f[max(0, len(f)-n):], " ")
}

// firstWords is the first n white-space separated words of s's first
// sentence.
func firstWords(s string, n int) string {
	if end := sentenceEndRE.FindStringIndex(s); end != nil {
		s = s[:end[0]]
	}
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}

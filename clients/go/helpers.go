package client

import (
	"html"
	"regexp"
	"strings"
)

// The helpers below are client-side only: the service extracts nothing.

var (
	textLinkRE = regexp.MustCompile(`https?://[^\s<>"'\x60]+`)
	hrefRE     = regexp.MustCompile(`(?i)\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+))`)
	tagRE      = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)
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
	seen := map[string]bool{}
	add := func(u string) {
		u = strings.TrimSpace(html.UnescapeString(u))
		lower := strings.ToLower(u)
		if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") || seen[u] {
			return
		}
		seen[u] = true
		out = append(out, u)
	}
	for _, u := range textLinkRE.FindAllString(msg.TextBody, -1) {
		add(trimLink(u))
	}
	for _, m := range hrefRE.FindAllStringSubmatch(msg.HTMLBody, -1) {
		add(m[1] + m[2] + m[3])
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
		default:
			return u
		}
		u = u[:len(u)-1]
	}
	return u
}

// HTMLText is the text of an HTML body: comments and tags removed,
// entities unescaped.
func HTMLText(body string) string {
	return html.UnescapeString(tagRE.ReplaceAllString(body, " "))
}

// Code returns the first match of pattern (nil: DefaultCodePattern, 4 to 8
// digits) in text_body, else in the text of html_body, else in the subject;
// when pattern has a capture group, the first group's text. ok is false
// when nothing matches.
func Code(msg Message, pattern *regexp.Regexp) (code string, ok bool) {
	if pattern == nil {
		pattern = DefaultCodePattern
	}
	for _, s := range []string{msg.TextBody, HTMLText(msg.HTMLBody), msg.Subject} {
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

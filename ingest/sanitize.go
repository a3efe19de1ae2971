package ingest

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/microcosm-cc/bluemonday"
)

// Attribute value patterns of the HTML policy. Attribute values are escaped on
// output, so these patterns exist to keep values meaningful, not to stop
// injection; URLs and styles are validated by bluemonday itself.
var (
	htmlAlign    = regexp.MustCompile(`(?i)^(left|right|center|justify|top|middle|bottom|baseline|texttop|absmiddle|absbottom)$`)
	htmlColor    = regexp.MustCompile(`^(#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,30})$`)
	htmlFontFace = regexp.MustCompile(`^[\p{L}\p{N} ,'"_-]{1,200}$`)
	htmlFontSize = regexp.MustCompile(`^[+-]?[1-7]$`)
	htmlLang     = regexp.MustCompile(`^[a-zA-Z]{2,8}(-[a-zA-Z0-9]{1,8})*$`)

	// linkHref keeps only absolute http and https links with a host, and
	// mailto links: relative links mean nothing in an isolated frame and every
	// other scheme (javascript:, vbscript:, data:, file:, cid:, ...) is either
	// dangerous or dead.
	linkHref = regexp.MustCompile(`(?i)^\s*(https?://[^\s/?#]|mailto:)`)

	// dataImage matches the opaque part of the data: URIs kept as images.
	// SVG is left out on purpose: it is a document that can carry script.
	dataImage = regexp.MustCompile(`(?i)^image/(png|gif|jpeg|webp);base64,`)

	// imageSrc is img.src without remote images, imageSrcRemote with them.
	// http: is never allowed: it would leak the reader over plain text too.
	imageSrc       = regexp.MustCompile(`(?i)^\s*data:image/(png|gif|jpeg|webp);base64,`)
	imageSrcRemote = regexp.MustCompile(`(?i)^\s*(https://[^\s/?#]|data:image/(png|gif|jpeg|webp);base64,)`)
)

// styleProperties are the CSS properties kept in style attributes. Each is
// checked by bluemonday's default handler for that property, which accepts
// keywords, lengths and colors only — no url(), no expression(), no
// functions. Properties that take an image (background, background-image,
// list-style, border-image, cursor, content) and those that position content
// over the frame (position, z-index, transform) are not listed.
var styleProperties = []string{
	"color", "background-color",
	"font", "font-family", "font-size", "font-style", "font-variant", "font-weight",
	"text-align", "text-decoration", "text-indent", "text-transform",
	"line-height", "letter-spacing", "word-spacing", "white-space", "word-break", "word-wrap",
	"vertical-align", "direction", "display",
	"margin", "margin-top", "margin-right", "margin-bottom", "margin-left",
	"padding", "padding-top", "padding-right", "padding-bottom", "padding-left",
	"border", "border-top", "border-right", "border-bottom", "border-left",
	"border-color", "border-style", "border-width", "border-radius",
	"border-collapse", "border-spacing",
	"width", "height", "min-width", "max-width", "min-height", "max-height",
	"list-style-type", "list-style-position", "table-layout",
}

// newPolicy builds the HTML policy for mail rendered in an isolated frame.
// It starts from bluemonday.NewPolicy (nothing allowed) rather than
// UGCPolicy, which allows any remote image and cannot be narrowed.
//
// What is not listed is dropped: script, style, iframe, frame, object, embed,
// form and its controls, base, meta, link, svg and math elements lose their
// tags (script, style, iframe, object and a few others lose their content
// too), and any attribute not listed, including every on* handler, is
// removed.
func newPolicy(remoteImages bool, maxDataImageBytes int) *bluemonday.Policy {
	p := bluemonday.NewPolicy()

	p.AllowElements(
		"p", "div", "span", "br", "hr", "center", "blockquote", "pre", "address",
		"h1", "h2", "h3", "h4", "h5", "h6",
		"b", "strong", "i", "em", "u", "s", "strike", "del", "ins", "small", "big",
		"sub", "sup", "mark", "code", "kbd", "samp", "var", "tt", "abbr", "acronym",
		"cite", "dfn", "q", "bdi", "bdo", "wbr", "font",
		"section", "article", "header", "footer", "figure", "figcaption",
	)
	p.AllowLists()
	p.AllowTables()
	p.AllowElements("table", "thead", "tbody", "tfoot", "tr", "td", "th")

	p.AllowAttrs("dir").Matching(bluemonday.Direction).Globally()
	p.AllowAttrs("lang").Matching(htmlLang).Globally()
	p.AllowAttrs("title").Globally()
	p.AllowAttrs("align").Matching(htmlAlign).Globally()
	p.AllowAttrs("valign").Matching(bluemonday.CellVerticalAlign).Globally()
	p.AllowAttrs("bgcolor").Matching(htmlColor).OnElements("table", "tr", "td", "th")
	p.AllowAttrs("border", "cellpadding", "cellspacing").Matching(bluemonday.Integer).OnElements("table")
	p.AllowAttrs("color").Matching(htmlColor).OnElements("font")
	p.AllowAttrs("face").Matching(htmlFontFace).OnElements("font")
	p.AllowAttrs("size").Matching(htmlFontSize).OnElements("font")
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")

	p.AllowStyles(styleProperties...).Globally()

	// Links: bluemonday adds rel="nofollow noreferrer" to every link and
	// target="_blank" plus rel="noopener" to every absolute one, replacing
	// whatever the sender wrote.
	p.RequireParseableURLs(true)
	p.AllowURLSchemes("http", "https", "mailto")
	p.AllowAttrs("href").Matching(linkHref).OnElements("a")
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)

	// Images: alt text always; src only for small inline data: images and,
	// when allowed, https. cid: images are removed (there is no attachment
	// endpoint to resolve them) and remote ones by default, because loading
	// them tells the sender the message was read. bluemonday's
	// AllowDataURIImages is not used: it also admits SVG and has no size bound.
	p.AllowAttrs("alt").OnElements("img")
	p.AllowAttrs("width", "height").Matching(bluemonday.NumberOrPercent).OnElements("img")
	p.AllowAttrs("border").Matching(bluemonday.Integer).OnElements("img")
	src := imageSrc
	if remoteImages {
		src = imageSrcRemote
	}
	p.AllowAttrs("src").Matching(src).OnElements("img")
	p.AllowURLSchemeWithCustomPolicy("data", func(u *url.URL) bool {
		return dataImageAllowed(u, maxDataImageBytes)
	})
	return p
}

// dataImageAllowed reports whether a data: URL is a base64 PNG, GIF, JPEG or
// WebP image of at most maxBytes bytes (the whole URI), with no query or
// fragment: not even an empty "?" (ForceQuery), which the URL keeps.
func dataImageAllowed(u *url.URL, maxBytes int) bool {
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || len("data:")+len(u.Opaque) > maxBytes {
		return false
	}
	prefix := dataImage.FindString(u.Opaque)
	if prefix == "" {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(u.Opaque[len(prefix):])
	return err == nil
}

// Sanitize applies the HTML policy to html and returns the result, trimmed.
// Invalid UTF-8 is replaced first so the output is always valid UTF-8.
func (p *Parser) Sanitize(html string) string {
	return p.sanitizeUntil(html, time.Time{})
}

// sanitizeUntil is Sanitize with a deadline (none when zero): the sanitizer
// reads html through a deadlineReader as it tokenizes it. Its cost is
// linear, but about 4 MB/s of styled markup.
func (p *Parser) sanitizeUntil(html string, until time.Time) string {
	html = validUTF8(html)
	if strings.TrimSpace(html) == "" {
		return "" // bluemonday returns blank input as it is; trimmed, nothing
	}
	out := p.policy.SanitizeReader(deadlineReader{r: strings.NewReader(html), until: until})
	return strings.TrimSpace(dropControls(out.String()))
}

// sanitizeBounded sanitizes html and bounds the result to maxBytes. A result
// that is too long is cut between tags and sanitized again, so the cut never
// leaves half a tag or a dangling character reference, and ends with mark
// (htmlCutMark) within maxBytes (a bound too small for the mark cuts without
// it). Every pass stops at until.
func (p *Parser) sanitizeBounded(html string, maxBytes int, mark string, until time.Time) string {
	out := p.sanitizeUntil(html, until)
	if len(out) <= maxBytes {
		return out
	}
	bound := maxBytes
	if len(mark) < maxBytes {
		bound -= len(mark)
	} else {
		mark = ""
	}
	for limit := bound; len(out) > bound; {
		if limit <= 0 {
			return ""
		}
		out = p.sanitizeUntil(cutHTML(out, limit), until)
		// Sanitizing a cut never grows it in practice; if it ever did, cut
		// shorter by the overshoot until it fits.
		limit -= max(len(out)-bound, 1)
	}
	return out + mark
}

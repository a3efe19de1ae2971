package ingest

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// xssVectors are inputs in the style of the OWASP XSS filter evasion cheat
// sheet. Whatever the sanitizer makes of them, checkHTML must find nothing
// executable in the result.
var xssVectors = []string{
	// script elements in every casing and shape
	`<script>alert(1)</script>`,
	`<SCRIPT>alert(1)</SCRIPT>`,
	`<ScRiPt>alert(1)</sCrIpT>`,
	`<script src="https://evil.example/x.js"></script>`,
	`<SCRIPT SRC=http://xss.rocks/xss.js></SCRIPT>`,
	`<script/src="//evil.example/x.js"></script>`,
	`<script >alert(1)</script >`,
	`<<SCRIPT>alert("XSS");//\<</SCRIPT>`,
	`<SCRIPT SRC=http://xss.rocks/xss.js?< B >`,
	`<SCRIPT SRC=//xss.rocks/.j>`,
	`<script>alert(1)`,
	`<scr<script>ipt>alert(1)</scr</script>ipt>`,
	`<SCRIPT/XSS SRC="http://xss.rocks/xss.js"></SCRIPT>`,
	`</TITLE><SCRIPT>alert("XSS");</SCRIPT>`,
	`<IMG """><SCRIPT>alert("XSS")</SCRIPT>"\>`,
	`<?xml version="1.0"?><html:script xmlns:html="http://www.w3.org/1999/xhtml">alert(1)</html:script>`,
	`<![CDATA[<script>alert(1)</script>]]>`,
	`<template><script>alert(1)</script></template>`,
	// img and event handlers
	`<IMG SRC="javascript:alert('XSS');">`,
	`<IMG SRC=javascript:alert('XSS')>`,
	`<IMG SRC=JaVaScRiPt:alert('XSS')>`,
	`<IMG SRC=javascript:alert(&quot;XSS&quot;)>`,
	"<IMG SRC=`javascript:alert(\"RSnake says, 'XSS'\")`>",
	`<IMG SRC=javascript:alert(String.fromCharCode(88,83,83))>`,
	`<IMG SRC=# onmouseover="alert('xxs')">`,
	`<IMG SRC= onmouseover="alert('xxs')">`,
	`<IMG onmouseover="alert('xxs')">`,
	`<IMG SRC=/ onerror="alert(String.fromCharCode(88,83,83))"></img>`,
	`<img src=x onerror="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058&#0000097&#0000108&#0000101&#0000114&#0000116&#0000040&#0000039&#0000088&#0000083&#0000083&#0000039&#0000041">`,
	`<img src=x onerror=alert(1)//`,
	`<img src="x"/onerror="alert(1)">`,
	"<img\nsrc=x\nonerror=alert(1)>",
	`<img/src=x/onerror=alert(1)>`,
	`<img src=x:alert(alt) onerror=eval(src) alt=0>`,
	`<img src="https://ok.example/a.png" onerror="alert(1)">`,
	`<img src="data:image/png;base64,iVBORw0KGgo=" onload="alert(1)">`,
	`<img src="cid:foo" onerror="alert(1)">`,
	`<IMG DYNSRC="javascript:alert('XSS')">`,
	`<IMG LOWSRC="javascript:alert('XSS')">`,
	`<IMG SRC='vbscript:msgbox("XSS")'>`,
	`<IMG SRC="livescript:[code]">`,
	`<a onmouseover="alert(document.cookie)">xxs link</a>`,
	`<a onmouseover=alert(document.cookie)>xxs link</a>`,
	`<a href="https://ok.example/" onclick="alert(1)">ok</a>`,
	`<p style="color:red" onmouseover="alert(1)">x</p>`,
	`<x onclick=alert(1)>click`,
	"<BODY onload!#$%&()*~+-_.,:;?@[/|\\]^`=alert(\"XSS\")>",
	`<BODY ONLOAD=alert('XSS')>`,
	`<body onpageshow=alert(1)>`,
	`<input onfocus=alert(1) autofocus>`,
	`<select onfocus=alert(1) autofocus>`,
	`<textarea onfocus=alert(1) autofocus>`,
	`<keygen onfocus=alert(1) autofocus>`,
	`<video><source onerror="alert(1)">`,
	`<audio src=x onerror=alert(1)>`,
	`<details open ontoggle=alert(1)>`,
	`<marquee onstart=alert(1)>x</marquee>`,
	`<BGSOUND SRC="javascript:alert('XSS');">`,
	`<BR SIZE="&{alert('XSS')}">`,
	// javascript: URLs hidden by entities, whitespace, control characters
	`<IMG SRC=&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;&#97;&#108;&#101;&#114;&#116;&#40;&#39;&#88;&#83;&#83;&#39;&#41;>`,
	`<IMG SRC=&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058&#0000097&#0000108&#0000101&#0000114&#0000116&#0000040&#0000039&#0000088&#0000083&#0000083&#0000039&#0000041>`,
	`<IMG SRC=&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A&#x61&#x6C&#x65&#x72&#x74&#x28&#x27&#x58&#x53&#x53&#x27&#x29>`,
	"<IMG SRC=\"jav\tascript:alert('XSS');\">",
	`<IMG SRC="jav&#x09;ascript:alert('XSS');">`,
	`<IMG SRC="jav&#x0A;ascript:alert('XSS');">`,
	`<IMG SRC="jav&#x0D;ascript:alert('XSS');">`,
	"<IMG SRC=java\x00script:alert(\"XSS\")>",
	`<IMG SRC=" &#14;  javascript:alert('XSS');">`,
	`<IMG SRC="javascript:alert('XSS')"`,
	`<a href="jav&#x09;ascript:alert(1)">x</a>`,
	`<a href="jav&#x0A;ascript:alert(1)">x</a>`,
	`<a href="jav&#x0D;ascript:alert(1)">x</a>`,
	`<a href="&#106;avascript:alert(1)">x</a>`,
	`<a href="&#x6A;avascript&colon;alert(1)">x</a>`,
	`<a href="javascript&#58;alert(1)">x</a>`,
	`<a href=" javascript:alert(1)">x</a>`,
	`<a href="JaVaScRiPt:alert(1)">x</a>`,
	"<a href=\"java\x00script:alert(1)\">x</a>",
	"<a href=\"\x01javascript:alert(1)\">x</a>",
	"<a href=\"\u00a0javascript:alert(1)\">x</a>",
	`<a href="javascript://%0Aalert(1)">x</a>`,
	`<a href="vbscript:msgbox(1)">x</a>`,
	`<a href="VBScript:msgbox(1)">x</a>`,
	`<a href="//evil.example/">protocol-relative</a>`,
	`<a href="http://example.org/" target="_parent">x</a>`,
	// data: URLs
	`<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>`,
	`<a href="data:text/html,<script>alert(1)</script>">x</a>`,
	`<a href="data:image/png;base64,iVBORw0KGgo=">x</a>`,
	`<img src="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">`,
	`<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+">`,
	`<img src="data:image/png;base64,iVBORw0KGgo=?x=<script>">`,
	`<META HTTP-EQUIV="refresh" CONTENT="0;url=data:text/html base64,PHNjcmlwdD5hbGVydCgnWFNTJyk8L3NjcmlwdD4K">`,
	// SVG and MathML
	`<svg/onload=alert('XSS')>`,
	`<svg><script>alert(1)</script></svg>`,
	`<svg><a xlink:href="javascript:alert(1)"><text x="20" y="20">XSS</text></a></svg>`,
	`<svg><animate onbegin=alert(1) attributeName=x dur=1s>`,
	`<svg><set attributeName="href" to="javascript:alert(1)"/></svg>`,
	`<svg><style>{font-family:'<iframe/onload=alert(1)>'}</style></svg>`,
	`<svg><foreignObject><img src=x onerror=alert(1)></foreignObject></svg>`,
	`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>`,
	`<math href="javascript:alert(1)">CLICK</math>`,
	`<math><maction actiontype="statusline#" xlink:href="javascript:alert(1)">CLICK</maction></math>`,
	// CSS
	`<STYLE>li {list-style-image: url("javascript:alert('XSS')");}</STYLE><UL><LI>XSS</br>`,
	`<STYLE>@import'http://xss.rocks/xss.css';</STYLE>`,
	`<STYLE>BODY{-moz-binding:url("http://xss.rocks/xssmoz.xml#xss")}</STYLE>`,
	`<STYLE>@im\port'\ja\vasc\ript:alert("XSS")';</STYLE>`,
	`<STYLE TYPE="text/javascript">alert('XSS');</STYLE>`,
	`<STYLE>.XSS{background-image:url("javascript:alert('XSS')");}</STYLE><A CLASS=XSS></A>`,
	`<STYLE type="text/css">BODY{background:url("javascript:alert('XSS')")}</STYLE>`,
	`<style><img src=x onerror=alert(1)></style>`,
	`<IMG STYLE="xss:expr/*XSS*/ession(alert('XSS'))">`,
	`<p style="width: expression(alert(1))">x</p>`,
	`<p style="color: expression(alert(1))">x</p>`,
	`<p style="width: e\xpression(alert(1))">x</p>`,
	`<p style="width:\65 xpression(alert(1))">x</p>`,
	`<p style="background:url(javascript:alert(1))">x</p>`,
	`<p style="background-image: url('javascript:alert(1)')">x</p>`,
	`<p style="color: red; background: url(https://track.example/x.png)">tracked</p>`,
	`<div style="behavior: url(xss.htc)">x</div>`,
	`<div style="color: red; -moz-binding: url(http://evil/x.xml#xss)">x</div>`,
	`<div style="--x: url(javascript:alert(1))">x</div>`,
	`<div style="list-style: url(javascript:alert(1))">x</div>`,
	`<div style="font-family: 'x'; color: red</style><script>alert(1)</script>">x</div>`,
	`<XSS STYLE="xss:expression(alert('XSS'))">`,
	`<XSS STYLE="behavior: url(xss.htc);">`,
	`<DIV STYLE="background-image: url(javascript:alert('XSS'))">`,
	`<DIV STYLE="background-image:\0075\0072\006C\0028'\006a\0061\0076\0061\0073\0063\0072\0069\0070\0074\003a\0061\006c\0065\0072\0074\0028.1027\0058.1053\0053\0027\0029'\0029">`,
	`<DIV STYLE="background-image: url(&#1;javascript:alert('XSS'))">`,
	`<DIV STYLE="width: expression(alert('XSS'));">`,
	`<TABLE BACKGROUND="javascript:alert('XSS')">`,
	`<TABLE><TD BACKGROUND="javascript:alert('XSS')">`,
	`<table><tr><td background="javascript:alert(1)" style="background:url(javascript:alert(1))">x</td></tr></table>`,
	`<div style="position:fixed;top:0;left:0;width:100%;height:100%">overlay</div>`,
	// meta, link, base
	`<META HTTP-EQUIV="refresh" CONTENT="0;url=javascript:alert('XSS');">`,
	`<META HTTP-EQUIV="refresh" CONTENT="0; URL=http://;URL=javascript:alert('XSS');">`,
	`<META HTTP-EQUIV="Link" Content="<http://xss.rocks/xss.css>; REL=stylesheet">`,
	`<meta charset="x-imap4-modified-utf7">&ADz&AGn&AG0&AEf&ACA&AHM&AHI&AGO&AD0&AGn&ACA&AG8Abg&AGUAcgByAG8AcgA9AGEAbABlAHIAdAAoADEAKQ&ACAAPABi`,
	`<LINK REL="stylesheet" HREF="javascript:alert('XSS');">`,
	`<LINK REL="stylesheet" HREF="http://xss.rocks/xss.css">`,
	`<BASE HREF="javascript:alert('XSS');//">`,
	`<base target="_top" href="https://evil.example/">`,
	// frames, objects, forms
	`<IFRAME SRC="javascript:alert('XSS');"></IFRAME>`,
	`<IFRAME SRC=# onmouseover="alert(document.cookie)"></IFRAME>`,
	`<iframe src=http://xss.rocks/scriptlet.html <`,
	`<iframe srcdoc="<script>alert(1)</script>">`,
	`<FRAMESET><FRAME SRC="javascript:alert('XSS');"></FRAMESET>`,
	`<frame src="javascript:alert(1)">`,
	`<OBJECT TYPE="text/x-scriptlet" DATA="http://xss.rocks/scriptlet.html"></OBJECT>`,
	`<object data="javascript:alert(1)">`,
	`<applet code="x">`,
	`<EMBED SRC="http://ha.ckers.org/xss.swf" AllowScriptAccess="always"></EMBED>`,
	`<embed src="javascript:alert(1)">`,
	`<EMBED SRC="data:image/svg+xml;base64,PHN2ZyB4bWxuczpzdmc9Imh0dHA6Ly93d3cudzMub3JnLzIwMDAvc3ZnIj48c2NyaXB0PmFsZXJ0KDEpPC9zY3JpcHQ+PC9zdmc+" type="image/svg+xml" AllowScriptAccess="always"></EMBED>`,
	`<INPUT TYPE="IMAGE" SRC="javascript:alert('XSS');">`,
	`<FORM><INPUT TYPE="text" NAME="x" formaction="javascript:alert(1)"></FORM>`,
	`<form action="javascript:alert(1)"><button>x</button></form>`,
	`<button formaction="javascript:alert(1)">x</button>`,
	`<isindex action="javascript:alert(1)" type=image>`,
	`<BODY BACKGROUND="javascript:alert('XSS')">`,
	// broken tags, quote breaking, parser confusion
	`<p title="</p><script>alert(1)</script>">x</p>`,
	`<a title='x"onmouseover="alert(1)'>x</a>`,
	`<img alt="x" "onerror=alert(1)" src=x>`,
	"<img src=\"x` onerror=alert(1)>",
	`<a href="https://ok.example/"" onclick="alert(1)">x</a>`,
	`<a href='https://ok.example/'onclick='alert(1)'>x</a>`,
	`<noscript><p title="</noscript><img src=x onerror=alert(1)>">`,
	`<!--<img src="--><img src=x onerror=alert(1)//">`,
	`<!--[if gte IE 4]><SCRIPT>alert('XSS');</SCRIPT><![endif]-->`,
	`<xmp><script>alert(1)</script></xmp>`,
	`<plaintext><script>alert(1)</script>`,
	`<title><script>alert(1)</script></title>`,
	`<textarea><script>alert(1)</script></textarea>`,
	`<div <script>alert(1)</script>>x</div>`,
	`<a href="https://ok.example/"<script>alert(1)</script>>x</a>`,
	`<</p>iframe src=javascript:alert(1)//`,
	`¼script¾alert(¢XSS¢)¼/script¾`,
	`+ADw-script+AD4-alert(1)+ADw-/script+AD4-`,
	`\";alert('XSS');//`,
	"<a href=\"https://example.org/\">\x00<script>alert(1)</script></a>",
	`<a href="mailto:x@example.org?body=<script>alert(1)</script>">x</a>`,
	`<a href="https://a.example/"><img src="https://b.example/x.gif"></a>`,
}

func TestSanitizeXSS(t *testing.T) {
	if len(xssVectors) < 100 {
		t.Fatalf("%d XSS vectors, want at least 100", len(xssVectors))
	}
	for _, remote := range []bool{false, true} {
		p := NewParser(ParserConfig{RemoteImages: remote})
		for i, v := range xssVectors {
			got := p.Sanitize(v)
			if err := checkHTML(got, !remote); err != nil {
				t.Errorf("RemoteImages=%v, vector %d %q:\n%v\noutput: %q", remote, i, v, err, got)
			}
			if again := p.Sanitize(got); again != got {
				t.Errorf("vector %d: Sanitize is not idempotent:\n once %q\ntwice %q", i, got, again)
			}
		}
	}
}

// TestSanitizeBenign checks that ordinary mail markup survives as written,
// with links rewritten to open outside the frame.
func TestSanitizeBenign(t *testing.T) {
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	big := "data:image/png;base64," + strings.Repeat("A", DefaultMaxDataImageBytes)
	tests := []struct {
		name   string
		remote bool
		in     string
		want   string
	}{
		{"bold", false, `<b>bold</b>`, `<b>bold</b>`},
		// Control characters go, as from subject, from and text_body: raw,
		// and as character references the sanitizer decodes.
		{"NUL and ESC", false, "<b>a\x00b\x1b[31mc</b>\x7f", `<b>ab[31mc</b>`},
		{"NUL and ESC references", false, `<p>a&#0;b&#27;c&#x1B;d</p>`, "<p>a\ufffdbcd</p>"}, // &#0; is U+FFFD by the HTML spec
		{"white space kept", false, "<pre>a\tb\r\nc</pre>", "<pre>a\tb\nc</pre>"},
		{"formatting", false, `<i>i</i> <em>em</em> <strong>s</strong> <u>u</u> <s>s</s> <sub>2</sub><sup>3</sup> <code>c</code>`, `<i>i</i> <em>em</em> <strong>s</strong> <u>u</u> <s>s</s> <sub>2</sub><sup>3</sup> <code>c</code>`},
		{"headings and paragraphs", false, `<h1>Title</h1><h3>Sub</h3><p>para</p><br><hr>`, `<h1>Title</h1><h3>Sub</h3><p>para</p><br><hr>`},
		{"lists", false, `<ul><li>one</li><li>two</li></ul><ol start="3"><li>three</li></ol><dl><dt>t</dt><dd>d</dd></dl>`, `<ul><li>one</li><li>two</li></ul><ol start="3"><li>three</li></ol><dl><dt>t</dt><dd>d</dd></dl>`},
		{"table", false, `<table border="0" cellpadding="4" cellspacing="0" width="600" bgcolor="#ffffff"><thead><tr><th colspan="2">h</th></tr></thead><tbody><tr><td align="center" valign="top" width="50%">x</td><td>y</td></tr></tbody></table>`, `<table border="0" cellpadding="4" cellspacing="0" width="600" bgcolor="#ffffff"><thead><tr><th colspan="2">h</th></tr></thead><tbody><tr><td align="center" valign="top" width="50%">x</td><td>y</td></tr></tbody></table>`},
		{"https link", false, `<a href="https://example.org/x?a=1&amp;b=2">x</a>`, `<a href="https://example.org/x?a=1&amp;b=2" rel="nofollow noreferrer noopener" target="_blank">x</a>`},
		{"http link", false, `<a href="http://example.org/">x</a>`, `<a href="http://example.org/" rel="nofollow noreferrer noopener" target="_blank">x</a>`},
		{"link with sender's rel and target", false, `<a href="https://example.org/" rel="opener" target="_self" title="t">x</a>`, `<a href="https://example.org/" title="t" rel="nofollow noreferrer noopener" target="_blank">x</a>`},
		{"mailto link", false, `<a href="mailto:a@example.org">mail</a>`, `<a href="mailto:a@example.org" rel="nofollow noreferrer">mail</a>`},
		{"relative link dropped", false, `<a href="/x">x</a>`, `x`},
		{"link without host dropped", false, `<a href="http:">x</a><a href="https:x.example">y</a><a href="https://">z</a>`, `xyz`},
		{"image without host dropped", true, `<img src="https://" alt="a"><img src="https:///x.png" alt="b">`, `<img alt="a"><img alt="b">`},
		{"small data image", false, `<img src="` + png + `" alt="dot">`, `<img src="` + png + `" alt="dot">`},
		{"large data image dropped", false, `<img src="` + big + `" alt="big">`, `<img alt="big">`},
		{"remote image dropped", false, `<img src="https://cdn.example.org/logo.png" alt="Logo" width="100">`, `<img alt="Logo" width="100">`},
		{"remote image kept", true, `<img src="https://cdn.example.org/logo.png" alt="Logo" width="100">`, `<img src="https://cdn.example.org/logo.png" alt="Logo" width="100">`},
		{"http image dropped even when remote allowed", true, `<img src="http://cdn.example.org/logo.png" alt="Logo">`, `<img alt="Logo">`},
		{"cid image dropped", true, `<img src="cid:logo@example.org" alt="Logo">`, `<img alt="Logo">`},
		{"image without alt or src dropped", false, `<p><img src="https://track.example/p.gif"></p>`, `<p></p>`},
		{"style color", false, `<p style="color: red; font-weight: bold">x</p>`, `<p style="color: red; font-weight: bold">x</p>`},
		{"style hex color", false, `<span style="color:#336699;background-color:#fff">x</span>`, `<span style="color: #336699; background-color: #fff">x</span>`},
		{"style box model", false, `<div style="margin: 0 auto; padding: 8px 16px; border: 1px solid #cccccc; width: 600px; text-align: center">x</div>`, `<div style="margin: 0 auto; padding: 8px 16px; border: 1px solid #cccccc; width: 600px; text-align: center">x</div>`},
		{"style unsafe property dropped, safe kept", false, `<p style="color: blue; background: url(https://track.example/x)">x</p>`, `<p style="color: blue">x</p>`},
		{"font", false, `<font color="red" face="Arial, sans-serif" size="2">x</font>`, `<font color="red" face="Arial, sans-serif" size="2">x</font>`},
		{"quotes and pre", false, `<blockquote>q</blockquote><pre>  code</pre>`, `<blockquote>q</blockquote><pre>  code</pre>`},
		{"direction", false, `<p dir="rtl" lang="ar">x</p>`, `<p dir="rtl" lang="ar">x</p>`},
		{"entities", false, `<p>a &amp; b &lt; c &gt; d &quot;e&quot;</p>`, `<p>a &amp; b &lt; c &gt; d &#34;e&#34;</p>`},
		{"head and document tags stripped", false, `<html><head><title>T</title><style>p{}</style></head><body><p>x</p></body></html>`, `<p>x</p>`},
		{"comments dropped", false, `<p>a<!-- hidden -->b</p>`, `<p>ab</p>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(ParserConfig{RemoteImages: tt.remote})
			got := p.Sanitize(tt.in)
			if got != tt.want {
				t.Errorf("Sanitize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if err := checkHTML(got, !tt.remote); err != nil {
				t.Error(err)
			}
		})
	}
}

// Elements and attributes the policy may emit; anything else in its output
// is a defect. html, head and body are added by the tree parser.
var (
	safeElements = set("html", "head", "body",
		"p", "div", "span", "br", "hr", "center", "blockquote", "pre", "address",
		"h1", "h2", "h3", "h4", "h5", "h6",
		"b", "strong", "i", "em", "u", "s", "strike", "del", "ins", "small", "big",
		"sub", "sup", "mark", "code", "kbd", "samp", "var", "tt", "abbr", "acronym",
		"cite", "dfn", "q", "bdi", "bdo", "wbr", "font",
		"section", "article", "header", "footer", "figure", "figcaption",
		"ul", "ol", "li", "dl", "dt", "dd",
		"table", "caption", "col", "colgroup", "thead", "tbody", "tfoot", "tr", "td", "th",
		"a", "img")
	safeAttributes = set("dir", "lang", "title", "align", "valign", "bgcolor", "border",
		"cellpadding", "cellspacing", "color", "face", "size", "start", "type", "value",
		"width", "height", "summary", "span", "abbr", "colspan", "rowspan", "headers",
		"scope", "nowrap", "style", "href", "rel", "target", "alt", "src")
	badStyle  = regexp.MustCompile(`(?i)expression|url\s*\(|javascript|vbscript|behavio|binding|@import|image\s*\(|\\|/\*|(^|[;\s])(position|z-index)\s*:`)
	safeHref  = regexp.MustCompile(`^(https?://|mailto:)`)
	safeSrc   = regexp.MustCompile(`^data:image/(png|gif|jpeg|webp);base64,[a-z0-9+/]*=*$`)
	remoteSrc = regexp.MustCompile(`^https://`)
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkHTML returns an error if out contains anything executable or outside
// the policy: an element or attribute not in the safe lists, SVG or MathML
// content, an event handler, a link or image URL with another scheme (after
// entity decoding, removal of white space and control characters, and
// lowercasing), an unsafe inline style, a comment, or — when noRemote — a
// remote image. It looks at out twice: as a browser builds the tree
// (html.Parse, which applies the foreign-content rules behind mutation XSS)
// and token by token.
func checkHTML(out string, noRemote bool) error {
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	var errs []error
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			if n.Namespace != "" {
				errs = append(errs, fmt.Errorf("foreign element %s:%s", n.Namespace, n.Data))
			}
			errs = append(errs, checkElement(n.Data, n.Attr, noRemote)...)
		case html.CommentNode:
			errs = append(errs, fmt.Errorf("comment %q", n.Data))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)

	z := html.NewTokenizer(strings.NewReader(out))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if !errors.Is(z.Err(), io.EOF) {
				errs = append(errs, z.Err())
			}
			break
		}
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			errs = append(errs, checkElement(tok.Data, tok.Attr, noRemote)...)
		case html.CommentToken, html.DoctypeToken:
			errs = append(errs, fmt.Errorf("%v %q", tt, tok.Data))
		}
	}
	return errors.Join(errs...)
}

func checkElement(name string, attrs []html.Attribute, noRemote bool) []error {
	var errs []error
	if !safeElements[name] {
		errs = append(errs, fmt.Errorf("element <%s>", name))
	}
	for _, a := range attrs {
		key := strings.ToLower(a.Key)
		val := normalizeURL(a.Val)
		switch {
		case a.Namespace != "" || !safeAttributes[key] || strings.HasPrefix(key, "on"):
			errs = append(errs, fmt.Errorf("attribute %s on <%s>", a.Key, name))
		case key == "href" && !safeHref.MatchString(val):
			errs = append(errs, fmt.Errorf("href %q on <%s>", a.Val, name))
		case key == "src" && !(safeSrc.MatchString(val) || !noRemote && remoteSrc.MatchString(val)):
			errs = append(errs, fmt.Errorf("src %q on <%s>", a.Val, name))
		case key == "style" && badStyle.MatchString(a.Val):
			errs = append(errs, fmt.Errorf("style %q on <%s>", a.Val, name))
		}
	}
	return errs
}

// normalizeURL undoes what browsers ignore in a URL's scheme: surrounding
// white space, embedded TAB, CR, LF and other control characters, and case.
// Character references are already decoded by the HTML parser.
func normalizeURL(s string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f || r == '\u00a0' {
			return -1
		}
		return r
	}, s))
}

// FuzzSanitize checks that no input makes the policy emit anything
// executable, and that its output is stable when sanitized again.
func FuzzSanitize(f *testing.F) {
	for _, v := range xssVectors {
		f.Add(v)
	}
	p := NewParser(ParserConfig{})
	f.Fuzz(func(t *testing.T, in string) {
		out := p.Sanitize(in)
		if err := checkHTML(out, true); err != nil {
			t.Fatalf("Sanitize(%q) = %q: %v", in, out, err)
		}
		if again := p.Sanitize(out); again != out {
			t.Fatalf("Sanitize not idempotent on %q:\n once %q\ntwice %q", in, out, again)
		}
	})
}

// TestCheckHTMLCatches keeps the checker honest: each of these outputs is
// unsafe, and checkHTML must say so, or TestSanitizeXSS proves nothing.
func TestCheckHTMLCatches(t *testing.T) {
	unsafe := []string{
		`<script>alert(1)</script>`,
		`<SCRIPT>alert(1)</SCRIPT>`,
		`<img src=x onerror=alert(1)>`,
		`<p onclick="x">x</p>`,
		`<a href="javascript:alert(1)">x</a>`,
		`<a href=" JAVASCRIPT:alert(1)">x</a>`,
		`<a href="java&#x09;script:alert(1)">x</a>`,
		"<a href=\"java\x00script:alert(1)\">x</a>",
		`<a href="vbscript:msgbox(1)">x</a>`,
		`<a href="data:text/html,<script>alert(1)</script>">x</a>`,
		`<a href="/relative">x</a>`,
		`<img src="data:image/svg+xml;base64,PHN2Zz4=">`,
		`<img src="https://track.example/p.gif">`,
		`<img src="http://track.example/p.gif">`,
		`<img src="cid:x@example.org">`,
		`<p style="background: url(https://track.example/x)">x</p>`,
		`<p style="width: expression(alert(1))">x</p>`,
		`<p style="position: fixed">x</p>`,
		`<svg><a>x</a></svg>`,
		`<math><mi>x</mi></math>`,
		`<iframe src="https://example.org/"></iframe>`,
		`<object data="x"></object>`,
		`<embed src="x">`,
		`<form><input name="x"></form>`,
		`<style>p{}</style>`,
		`<base href="https://evil.example/">`,
		`<meta http-equiv="refresh" content="0">`,
		`<link rel="stylesheet" href="https://evil.example/x.css">`,
		`<p class="x">x</p>`,
		`<!-- comment -->`,
	}
	for _, s := range unsafe {
		if err := checkHTML(s, true); err == nil {
			t.Errorf("checkHTML(%q) = nil, want an error", s)
		}
	}
}

func TestSanitizeDataImageLimit(t *testing.T) {
	uri := "data:image/gif;base64," + strings.Repeat("R0lG", 20) // 102 bytes
	tests := []struct {
		max  int
		kept bool
	}{
		{max: len(uri), kept: true},
		{max: len(uri) - 1, kept: false},
	}
	for _, tt := range tests {
		p := NewParser(ParserConfig{MaxDataImageBytes: tt.max})
		got := p.Sanitize(`<img src="` + uri + `" alt="x">`)
		if kept := strings.Contains(got, uri); kept != tt.kept {
			t.Errorf("MaxDataImageBytes=%d: image kept = %v, want %v (%q)", tt.max, kept, tt.kept, got)
		}
	}
}

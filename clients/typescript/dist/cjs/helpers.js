"use strict";
// links() and code(): the client-side helpers of the contract
// (clients/SCENARIOS.md); the service extracts nothing.
Object.defineProperty(exports, "__esModule", { value: true });
exports.DEFAULT_CODE = void 0;
exports.htmlUnescape = htmlUnescape;
exports.htmlText = htmlText;
exports.linksWithText = linksWithText;
exports.links = links;
exports.code = code;
exports.codes = codes;
const NAMED = {
    amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0',
};
/** Unescapes HTML character references: the common named ones and every numeric one. */
function htmlUnescape(s) {
    return s.replace(/&(#[xX][0-9a-fA-F]+|#\d+|[a-zA-Z]+);?/g, (m, ref) => {
        if (ref[0] === '#') {
            const n = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
            return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : m;
        }
        return NAMED[ref.toLowerCase()] ?? m;
    });
}
/** The text of an HTML body: tags removed, entities unescaped. */
function htmlText(html) {
    return htmlUnescape(html
        .replace(/<(script|style)\b[\s\S]*?<\/\1\s*>/gi, ' ')
        .replace(/<!--[\s\S]*?-->/g, ' ')
        .replace(/<[^>]*>/g, ' '));
}
const TEXT_URL = /https?:\/\/[^\s<>"'`]+/gi;
const HREF = /\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/gi;
/**
 * Every http and https link of a message with its text: those in text_body
 * (text ""), then the hrefs of html_body (the text of their `<a>`),
 * HTML-unescaped, in order of first appearance, each URL once (its first
 * appearance gives the text).
 */
function linksWithText(message) {
    const seen = new Set();
    const out = [];
    const add = (url, text) => {
        if (!/^https?:\/\//i.test(url) || seen.has(url))
            return;
        seen.add(url);
        out.push({ url, text });
    };
    for (const m of (message.text_body ?? '').matchAll(TEXT_URL)) {
        // Trailing punctuation belongs to the sentence, not the link.
        add(htmlUnescape(m[0].replace(/[.,;:!?)\]}]+$/, '')), '');
    }
    const html = message.html_body ?? '';
    for (const m of html.matchAll(HREF)) {
        add(htmlUnescape((m[1] ?? m[2] ?? m[3] ?? '').trim()), anchorText(html, m.index ?? 0));
    }
    return out;
}
/** The text of the `<a>` whose tag holds the href at i; "" when the href is not in an `<a>` tag. */
function anchorText(html, i) {
    const open = html.lastIndexOf('<', i);
    if (open < 0 || html.indexOf('>', open) < i || !/^<a\b/i.test(html.slice(open, open + 3)))
        return '';
    const end = html.indexOf('>', i);
    if (end < 0)
        return '';
    const close = html.slice(end + 1).search(/<\/a\s*>/i);
    const inner = close < 0 ? html.slice(end + 1) : html.slice(end + 1, end + 1 + close);
    return htmlText(inner).replace(/\s+/g, ' ').trim();
}
/**
 * Every http and https link of a message: those in text_body, then the hrefs
 * of html_body, HTML-unescaped, in order of first appearance, each once.
 */
function links(message) {
    return linksWithText(message).map((l) => l.url);
}
/** The default code: a run of 4 to 8 digits on word boundaries. */
exports.DEFAULT_CODE = /\b\d{4,8}\b/;
/** The words a code stands next to (case-insensitive). */
const KEYWORD = /\b(?:codes?|pin|otp|verification|one-time|passcode)\b/gi;
const RUN = /\b\d{4,8}\b/g;
/** How many words may stand between a keyword and its code ("code is 482913", "482913 is your code"). */
const NEAR = 3;
/** The texts a code is looked for in, in order: text_body, the text of html_body, the subject. */
function sources(message) {
    return [message.text_body ?? '', htmlText(message.html_body ?? ''), message.subject ?? ''];
}
/** Whether the text between a keyword and a run keeps them together: at most NEAR words, no sentence end or parenthesis. */
function near(gap) {
    if (/[()[\]]|[.!?](?:\s|$)/.test(gap))
        return false;
    const t = gap.trim();
    return t === '' || t.split(/\s+/).length <= NEAR;
}
/**
 * The code of a message. With a pattern: its first match in text_body, then
 * in the text of html_body, then in the subject (group 1 when it has a
 * capture group). Without (the contract's rule; each step looks in those
 * three texts in that order): a run of 4 to 8 digits at most 3 words after a
 * keyword (code, PIN, OTP, verification, one-time, passcode;
 * case-insensitive), else at most 3 words before one (not across a sentence
 * end or a parenthesis); otherwise the last run
 * of 6 digits; otherwise the first run of 4 to 8 digits. "Order #2026 placed 2026-11-24 … Your verification code is
 * 482913" gives 482913. undefined when nothing matches.
 */
function code(message, pattern) {
    const texts = sources(message);
    if (pattern !== undefined) {
        const re = typeof pattern === 'string' ? new RegExp(pattern) : new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
        for (const text of texts) {
            const m = re.exec(text);
            if (m)
                return m.length > 1 ? m[1] : m[0];
        }
        return undefined;
    }
    // A run after a keyword first ("code is 482913"), then one before it ("482913 is your code").
    for (const after of [true, false]) {
        for (const text of texts) {
            const keys = [...text.matchAll(KEYWORD)].map((k) => [k.index ?? 0, (k.index ?? 0) + k[0].length]);
            for (const r of text.matchAll(RUN)) {
                const start = r.index ?? 0;
                const end = start + r[0].length;
                const next = keys.some(([ks, ke]) => (after ? ke <= start && near(text.slice(ke, start)) : end <= ks && near(text.slice(end, ks))));
                if (next)
                    return r[0];
            }
        }
    }
    for (const text of texts) {
        const six = [...text.matchAll(RUN)].filter((r) => r[0].length === 6);
        if (six.length > 0)
            return six[six.length - 1][0];
    }
    for (const text of texts) {
        const m = exports.DEFAULT_CODE.exec(text);
        if (m)
            return m[0];
    }
    return undefined;
}
/** Every run of 4 to 8 digits of a message, in text_body, then the text of html_body, then the subject, in order, each once. */
function codes(message) {
    const out = [];
    for (const text of sources(message)) {
        for (const r of text.matchAll(RUN))
            if (!out.includes(r[0]))
                out.push(r[0]);
    }
    return out;
}

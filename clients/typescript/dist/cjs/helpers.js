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
/** The words a code stands next to: whole words, case-insensitive. */
const KEYWORD = /\b(?:code|pin|otp|verification|one-time|passcode)\b/i;
const RUN = /\b\d{4,8}\b/g;
/** How many words (white-space separated) before or after a run are looked at for a keyword. */
const NEAR = 3;
/** A sentence's end: the words looked at stop there. */
const SENTENCE_END = /[.!?](?:\s|$)/;
/** The texts a code is looked for in, in order: text_body, the text of html_body, the subject. */
function sources(message) {
    return [message.text_body ?? '', htmlText(message.html_body ?? ''), message.subject ?? ''];
}
/** The runs of 4 to 8 digits of the first text (text_body, html text, subject) that has one, with where they are. */
function runs(message) {
    for (const text of sources(message)) {
        const found = [...text.matchAll(RUN)];
        if (found.length > 0)
            return { text, runs: found };
    }
    return { text: '', runs: [] };
}
/** Whether a keyword is among the NEAR words before the run at [start, end) (after: false) or after it, within its sentence. */
function keywordNear(text, start, end, before) {
    let words;
    if (before) {
        let head = text.slice(0, start).replace(/\S*$/, ''); // the run's own word is not one of them
        for (let m = SENTENCE_END.exec(head); m !== null; m = SENTENCE_END.exec(head))
            head = head.slice(m.index + m[0].length);
        words = head.split(/\s+/).filter((w) => w !== '').slice(-NEAR);
    }
    else {
        let tail = text.slice(end);
        const stop = SENTENCE_END.exec(tail);
        if (stop !== null)
            tail = tail.slice(0, stop.index);
        words = tail.replace(/^\S*/, '').split(/\s+/).filter((w) => w !== '').slice(0, NEAR);
    }
    return words.some((w) => KEYWORD.test(w));
}
/**
 * The code of a message. With a pattern: its first match in text_body, then
 * in the text of html_body, then in the subject (group 1 when it has a
 * capture group). Without (the contract's rule), in the first of those texts
 * that has a run of 4 to 8 digits: the first run with a keyword (code, PIN,
 * OTP, verification, one-time, passcode; whole words, any case) among the 3
 * words before it; else the first run with one among the 3 words after it
 * ("482913 is your code"); the words stop at a sentence's end; else the last
 * run of 6 digits; else the first run. "Order #2026 placed 2026-11-24 … Your
 * verification code is 482913" gives 482913. undefined when nothing matches.
 */
function code(message, pattern) {
    if (pattern !== undefined) {
        const re = typeof pattern === 'string' ? new RegExp(pattern) : new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
        for (const text of sources(message)) {
            const m = re.exec(text);
            if (m)
                return m.length > 1 ? m[1] : m[0];
        }
        return undefined;
    }
    const { text, runs: found } = runs(message);
    for (const before of [true, false]) {
        for (const r of found) {
            const start = r.index ?? 0;
            if (keywordNear(text, start, start + r[0].length, before))
                return r[0];
        }
    }
    const six = found.filter((r) => r[0].length === 6);
    if (six.length > 0)
        return six[six.length - 1][0];
    return found[0]?.[0];
}
/** Every run of 4 to 8 digits, in order, of the text code() reads (the first of text_body, html text, subject that has one). */
function codes(message) {
    return runs(message).runs.map((r) => r[0]);
}

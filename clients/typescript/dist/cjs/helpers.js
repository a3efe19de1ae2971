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
// The rules and their cases are shared with the Go and Python clients:
// clients/testdata/codes.json and links.json.
/** White space for the helpers' words: Unicode's White_Space (the same set in the three clients). */
const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** HTML's own white space, between attributes. */
const HWS = '[ \\t\\n\\f\\r]';
/** The named references decoded (with their ";"): HTML's common ones. */
const NAMED = {
    amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', shy: '\u00ad', ensp: '\u2002',
    emsp: '\u2003', thinsp: '\u2009', zwnj: '\u200c', zwj: '\u200d', ndash: '\u2013', mdash: '\u2014',
    lsquo: '\u2018', rsquo: '\u2019', sbquo: '\u201a', ldquo: '\u201c', rdquo: '\u201d', bdquo: '\u201e',
    hellip: '\u2026', laquo: '\u00ab', raquo: '\u00bb', lsaquo: '\u2039', rsaquo: '\u203a', bull: '\u2022',
    middot: '\u00b7', copy: '\u00a9', reg: '\u00ae', trade: '\u2122', euro: '\u20ac', pound: '\u00a3',
    yen: '\u00a5', cent: '\u00a2', sect: '\u00a7', para: '\u00b6', deg: '\u00b0', plusmn: '\u00b1',
    times: '\u00d7', divide: '\u00f7', larr: '\u2190', rarr: '\u2192', uarr: '\u2191', darr: '\u2193',
    hArr: '\u21d4', harr: '\u2194', iexcl: '\u00a1', iquest: '\u00bf', dagger: '\u2020', Dagger: '\u2021',
};
/**
 * Decodes the character references of s once: numeric ones, and named ones
 * ended by their ";" (a name without it is left: a link's "&region=eu"
 * stays, as a browser leaves it). The Go and Python clients know every
 * name of HTML; this one the common ones above.
 */
function htmlUnescape(s) {
    return s.replace(/&(?:#([0-9]+);?|#[xX]([0-9a-fA-F]+);?|([A-Za-z][A-Za-z0-9]*);)/g, (m, dec, hex, name) => {
        if (name !== undefined)
            return NAMED[name] ?? m;
        const n = dec !== undefined ? parseInt(dec, 10) : parseInt(hex, 16);
        if (n === 0 || n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff))
            return '\ufffd';
        return String.fromCodePoint(n);
    });
}
/** What holds no text or link: comments, scripts, styles. */
const HIDDEN = /<!--[\s\S]*?-->|<script\b[\s\S]*?<\/script[ \t\n\f\r]*>|<style\b[\s\S]*?<\/style[ \t\n\f\r]*>/gi;
/** The text of an HTML body: comments, scripts, styles and tags removed (each as a space), references decoded. */
function htmlText(html) {
    return htmlUnescape(html.replace(HIDDEN, ' ').replace(/<[^>]*>/g, ' '));
}
const TEXT_URL = new RegExp(`https?://[^${WS}<>"'\`]+`, 'gi');
const HREF = new RegExp(`(?:^|${HWS})href${HWS}*=${HWS}*(?:"([^"]*)"|'([^']*)'|([^ \\t\\n\\f\\r>"']+))`, 'i');
/** A tag with an href (group 1: its attributes) and, for an `<a>`, the text up to its closing tag (group 2). */
const ANCHOR = /<(?:a\b([^>]*)>([\s\S]*?)<\/a[ \t\n\f\r]*>|[a-z][a-z0-9]*\b([^>]*\bhref[ \t\n\f\r]*=[^>]*)>)/gi;
const WS_RUN = new RegExp(`[${WS}]+`, 'g');
const WS_EDGES = new RegExp(`^[${WS}]+|[${WS}]+$`, 'g');
/** Words collapsed to single spaces, trimmed. */
function collapse(s) {
    return s.replace(WS_RUN, ' ').replace(WS_EDGES, '');
}
/** Drops the sentence's punctuation after a link in text (a closing bracket only without its opening one). */
function trimLink(u) {
    const count = (c) => u.split(c).length - 1;
    for (;;) {
        const last = u.slice(-1);
        if (last === '' ||
            !('.,;:!?*'.includes(last) ||
                (last === ')' && count('(') < count(')')) ||
                (last === ']' && count('[') < count(']')) ||
                (last === '}' && count('{') < count('}')))) {
            return u;
        }
        u = u.slice(0, -1);
    }
}
/**
 * Every http and https link of a message with its text: those in text_body,
 * then the hrefs of html_body, HTML-unescaped, in order of first appearance,
 * each URL once. The text is that of the link's first `<a>` that has one (tags
 * removed, references decoded, white space collapsed): in a text+HTML mail the
 * link of the text part takes its anchor's text ("Verify your email"); "" for
 * a link no `<a>` labels.
 */
function linksWithText(message) {
    const seen = new Map();
    const out = [];
    const add = (raw, text) => {
        const url = htmlUnescape(raw).replace(WS_EDGES, '');
        if (!/^https?:\/\//i.test(url))
            return;
        const had = seen.get(url);
        if (had !== undefined) {
            if (had.text === '')
                had.text = text; // the first <a> that has a text gives it
            return;
        }
        const link = { url, text };
        seen.set(url, link);
        out.push(link);
    };
    for (const m of (message.text_body ?? '').matchAll(TEXT_URL))
        add(trimLink(m[0]), '');
    const html = (message.html_body ?? '').replace(HIDDEN, ' ');
    for (const m of html.matchAll(ANCHOR)) {
        const href = HREF.exec(m[1] ?? m[3] ?? '');
        if (href === null)
            continue;
        add(href[1] ?? href[2] ?? href[3] ?? '', m[2] === undefined ? '' : collapse(htmlText(m[2])));
    }
    return out;
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
/** A sentence's end after a run: ".", "!" or "?" then white space or the field's end. */
const SENTENCE_END = new RegExp(`[.!?](?:[${WS}]|$)`);
/** A sentence's end before a run (which ends the text looked at, not the field): only with white space after it. */
const SENTENCE_END_BEFORE = new RegExp(`[.!?][${WS}]`, 'g');
const WORDS = new RegExp(`[${WS}]+`);
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
function words(s) {
    return s.split(WORDS).filter((w) => w !== '');
}
/**
 * Whether a keyword is among the NEAR words before the run at [start, end)
 * (before: true) or after it, within its sentence. The part of the run's own
 * word before (after) it counts as the nearest word: "PIN:" in "PIN:1234".
 */
function keywordNear(text, start, end, before) {
    let near;
    if (before) {
        let head = text.slice(0, start);
        let cut = 0;
        for (const m of head.matchAll(SENTENCE_END_BEFORE))
            cut = (m.index ?? 0) + m[0].length;
        head = head.slice(cut);
        near = words(head).slice(-NEAR);
    }
    else {
        let tail = text.slice(end);
        const stop = SENTENCE_END.exec(tail);
        if (stop !== null)
            tail = tail.slice(0, stop.index);
        near = words(tail).slice(0, NEAR);
    }
    return KEYWORD.test(near.join(' '));
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

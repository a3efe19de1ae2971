"""Client-side helpers to read what a message holds: its links and a
verification code. The service extracts nothing; these are pure functions."""

from __future__ import annotations

import html
import re
from typing import List, NamedTuple, Optional, Pattern, Tuple, Union

from .models import Message

# The rules and their cases are shared with the Go and TypeScript clients:
# clients/testdata/codes.json and links.json. The patterns are ASCII (\d, \b
# and \w as in Go and JavaScript) and white space is Unicode's White_Space,
# written out, as in the other two.

#: A run of 4 to 8 digits on word boundaries: what code() and codes() look for.
DEFAULT_CODE_PATTERN = re.compile(r"\b\d{4,8}\b", re.ASCII)

_WS = "\t\n\v\f\r \u0085\u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_HWS = "[ \t\n\f\r]"  # HTML's own white space, between attributes

# The words that name a code: whole words, any case.
_KEYWORD = re.compile(r"\b(?:code|pin|otp|verification|one-time|passcode)\b", re.ASCII | re.IGNORECASE)
# A sentence's end after a run: ".", "!" or "?" then white space or the
# field's end; before a run (which ends the text looked at, not the field)
# only with white space after it.
_SENTENCE_END = re.compile(f"[.!?](?:[{_WS}]|$)")
_SENTENCE_END_BEFORE = re.compile(f"[.!?][{_WS}]")
_WORDS = re.compile(f"[{_WS}]+")
_NEAR = 3  # words looked at before and after a run

# A character reference decoded: a numeric one, or a named one ended by its
# ";" (a link's "&region=eu" stays, as a browser leaves it).
_ENTITY = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*;)")
# What holds no text or link: comments, scripts, styles.
_HIDDEN = re.compile(
    r"<!--.*?-->|<script\b.*?</script[ \t\n\f\r]*>|<style\b.*?</style[ \t\n\f\r]*>",
    re.ASCII | re.IGNORECASE | re.DOTALL,
)
_TAG = re.compile(r"<[^>]*>")
# A tag with an href (group 1: its attributes) and, for an <a>, the text up
# to its closing tag (group 2).
_ANCHOR = re.compile(
    r"<(?:a\b([^>]*)>(.*?)</a[ \t\n\f\r]*>|[a-z][a-z0-9]*\b([^>]*\bhref[ \t\n\f\r]*=[^>]*)>)",
    re.ASCII | re.IGNORECASE | re.DOTALL,
)
_HREF = re.compile(
    f"(?:^|{_HWS})href{_HWS}*={_HWS}*(?:\"([^\"]*)\"|'([^']*)'|([^ \t\n\f\r>\"']+))",
    re.ASCII | re.IGNORECASE,
)
_URL = re.compile(f"https?://[^{_WS}<>\"'`]+", re.IGNORECASE)
_SCHEME = re.compile(r"https?://", re.IGNORECASE)


class Link(NamedTuple):
    """A link of a message: its URL, and the text of its anchor (an href
    of the HTML body), or "" (a link in the text body)."""

    url: str
    text: str


def _unescape(s: str) -> str:
    """The character references of s decoded once: numeric ones, and named
    ones ended by ";" (HTML's whole table)."""
    return _ENTITY.sub(lambda m: html.unescape(m.group(0)), s)


def _strip(s: str) -> str:
    return s.strip(_WS)


def _trim_link(url: str) -> str:
    """The sentence's punctuation after a link in text is not part of it;
    a closing bracket is, when the link opened it."""
    while url:
        last = url[-1]
        if not (
            last in ".,;:!?*"
            or last == ")" and url.count("(") < url.count(")")
            or last == "]" and url.count("[") < url.count("]")
            or last == "}" and url.count("{") < url.count("}")
        ):
            break
        url = url[:-1]
    return url


def links_with_text(message: Message) -> List[Link]:
    """Every http/https link in ``text_body`` and in the hrefs of
    ``html_body``, HTML-unescaped (once), in order of first appearance (text
    body first), each URL once, as :class:`Link` (``url``, ``text``): the
    text of the first ``<a>`` with that href that has one (tags removed,
    references decoded, white space collapsed), else "" (a bare link in the
    text body, the href of another tag or of an unclosed ``<a>``). In a
    text+HTML mail the link of the text part takes its anchor's text, so
    "the link labelled Verify your email" is
    ``next(l.url for l in links_with_text(m) if l.text == "Verify your email")``."""
    where = {}
    out: List[Link] = []

    def add(raw: str, text: str) -> None:
        url = _strip(_unescape(raw))
        if not _SCHEME.match(url):
            return
        i = where.get(url)
        if i is None:
            where[url] = len(out)
            out.append(Link(url, text))
        elif text and not out[i].text:
            out[i] = Link(url, text)

    for m in _URL.finditer(message.text_body or ""):
        add(_trim_link(m.group(0)), "")
    body = _HIDDEN.sub(" ", message.html_body or "")
    for m in _ANCHOR.finditer(body):
        href = _HREF.search(m.group(1) if m.group(1) is not None else m.group(3))
        if href is None:
            continue
        inner = m.group(2)
        text = "" if inner is None else " ".join(_WORDS.split(_strip(html_text(inner))))
        add(href.group(1) or href.group(2) or href.group(3) or "", text)
    return out


def links(message: Message) -> List[str]:
    """The URLs of :func:`links_with_text`: every http/https link in
    ``text_body`` and in the hrefs of ``html_body``, HTML-unescaped, in order
    of first appearance (text body first), each once."""
    return [link.url for link in links_with_text(message)]


def html_text(body: str) -> str:
    """The text of an HTML body: comments, scripts, styles and tags removed
    (each as a space), character references decoded."""
    return _unescape(_TAG.sub(" ", _HIDDEN.sub(" ", body)))


def _places(message: Message) -> List[str]:
    """Where a code is looked for, in order: the text body, the HTML's
    text, the subject."""
    return [message.text_body or "", html_text(message.html_body or ""), message.subject or ""]


def _runs(message: Message) -> Tuple[str, List["re.Match[str]"]]:
    """The first place with a run of 4 to 8 digits, and its runs."""
    for text in _places(message):
        found = list(DEFAULT_CODE_PATTERN.finditer(text))
        if found:
            return text, found
    return "", []


def _words(s: str) -> List[str]:
    return [w for w in _WORDS.split(s) if w]


def _keyword_near(text: str, start: int, end: int, before: bool) -> bool:
    """Whether a keyword is among the 3 words before the run at
    [start, end) (or after it), within its sentence. The part of the run's
    own word before (after) it counts as the nearest word: "PIN:" in
    "PIN:1234"."""
    if before:
        head = text[:start]
        ends = list(_SENTENCE_END_BEFORE.finditer(head))
        if ends:
            head = head[ends[-1].end():]
        near = _words(head)[-_NEAR:]
    else:
        tail = text[end:]
        stop = _SENTENCE_END.search(tail)
        if stop:
            tail = tail[: stop.start()]
        near = _words(tail)[:_NEAR]
    return _KEYWORD.search(" ".join(near)) is not None


def code(message: Message, pattern: Union[str, Pattern[str], None] = None) -> Optional[str]:
    """The message's verification code. Without ``pattern``, in the first
    of ``text_body``, the text of ``html_body`` and ``subject`` that has a
    run of 4 to 8 digits: the first run with a keyword (code, PIN, OTP,
    verification, one-time, passcode; whole words, any case) among the 3
    words before it; else the first run with one among the 3 words after it
    ("482913 is your code"); the words stop at a sentence's end; else the
    last run of exactly 6 digits; else the first run. So "Order #2026
    placed 2026-11-24 ... Your verification code is 482913" gives 482913.
    With ``pattern``: its first match (group 1 when it has a group) in
    those places, in that order. ``None`` when nothing matches."""
    if pattern is not None:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        for text in _places(message):
            m = rx.search(text)
            if m:
                return m.group(1) if rx.groups else m.group(0)
        return None
    text, found = _runs(message)
    for before in (True, False):
        for m in found:
            if _keyword_near(text, m.start(), m.end(), before):
                return m.group(0)
    six = [m.group(0) for m in found if len(m.group(0)) == 6]
    if six:
        return six[-1]
    return found[0].group(0) if found else None


def codes(message: Message) -> List[str]:
    """Every run of 4 to 8 digits, in order (repeats kept), of the place
    :func:`code` reads: the first of ``text_body``, the text of
    ``html_body`` and ``subject`` that has one. ``[]`` when there is
    none."""
    return [m.group(0) for m in _runs(message)[1]]

"""Client-side helpers to read what a message holds: its links and a
verification code. The service extracts nothing; these are pure functions."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import List, NamedTuple, Optional, Pattern, Tuple, Union

from .models import Message

#: A run of 4 to 8 digits on word boundaries: what code() and codes() look for.
DEFAULT_CODE_PATTERN = re.compile(r"\b\d{4,8}\b")

# The words that name a code; a run within three words after one (or before
# one) is preferred by code().
_KEYWORD = r"(?:verification|one[- ]time|passcode|code|pin|otp)"
# Up to three words (not starting with a digit) in one sentence: the gaps
# hold no full stop, "!" or "?" (a line break is fine: "Your code:\n\n482913").
_GAP = r"[^\w.!?]+"
_WORDS = rf"(?:{_GAP}[^\W\d]\w*){{0,3}}?"
_AFTER_KEYWORD = re.compile(rf"\b{_KEYWORD}\b{_WORDS}{_GAP}(\d{{4,8}})\b", re.IGNORECASE)
_BEFORE_KEYWORD = re.compile(rf"\b(\d{{4,8}})\b{_WORDS}{_GAP}{_KEYWORD}\b", re.IGNORECASE)
_SIX = re.compile(r"\b\d{6}\b")


class Link(NamedTuple):
    """A link of a message: its URL, and the text of its anchor (an href
    of the HTML body), or "" (a link in the text body)."""

    url: str
    text: str

_URL = re.compile(r"""https?://[^\s<>"'`]+""", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""


class _HTMLReader(HTMLParser):
    """Collects the href attributes (unescaped once, by the parser) with
    their anchors' text, and the text (entities unescaped; script and style
    left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: List[List[str]] = []  # [href, anchor text]
        self.text: List[str] = []
        self._skip = 0
        self._anchor: Optional[List[str]] = None  # the open <a>'s [href, text]

    def _href(self, tag, attrs):  # type: ignore[no-untyped-def]
        for name, value in attrs:
            if name == "href" and value:
                link = [value.strip(), ""]
                self.hrefs.append(link)
                return link
        return None

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag in ("script", "style"):
            self._skip += 1
        link = self._href(tag, attrs)
        if tag == "a":
            self._anchor = link

    def handle_startendtag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self._href(tag, attrs)

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag == "a":
            self._anchor = None

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if not self._skip:
            self.text.append(data)
            if self._anchor is not None:
                self._anchor[1] += data


def _read_html(body: str) -> _HTMLReader:
    r = _HTMLReader()
    r.feed(body)
    r.close()
    return r


def _text_links(text: str) -> List[str]:
    out = []
    for m in _URL.finditer(text):
        url = m.group(0)
        # Sentence punctuation after a link is not part of it; a closing
        # parenthesis is, when the link opened one.
        while url and url[-1] in _TRAILING:
            if url[-1] == ")" and url.count("(") >= url.count(")"):
                break
            url = url[:-1]
        out.append(html.unescape(url))
    return out


def links_with_text(message: Message) -> List[Link]:
    """Every http/https link in ``text_body`` and in the hrefs of
    ``html_body``, HTML-unescaped (once), in order of first appearance (text
    body first), each URL once, as :class:`Link` (``url``, ``text``): the
    text is the anchor's (whitespace collapsed) for an href, "" for a link
    in the text body. Follow "the link labelled Verify" with
    ``next(l.url for l in links_with_text(m) if l.text == "Verify")``."""
    found: List[Tuple[str, str]] = [(u, "") for u in _text_links(message.text_body)]
    if message.html_body:
        for href, text in _read_html(message.html_body).hrefs:
            # The parser has unescaped the attribute already: once is all.
            if re.match(r"https?://", href, re.IGNORECASE):
                found.append((href, " ".join(text.split())))
    seen = set()
    out = []
    for url, text in found:
        if url and url not in seen:
            seen.add(url)
            out.append(Link(url, text))
    return out


def links(message: Message) -> List[str]:
    """The URLs of :func:`links_with_text`: every http/https link in
    ``text_body`` and in the hrefs of ``html_body``, HTML-unescaped, in order
    of first appearance (text body first), each once."""
    return [link.url for link in links_with_text(message)]


def html_text(body: str) -> str:
    """The text of an HTML body: tags removed (each as a space, so cells and
    paragraphs stay apart), entities unescaped, script and style left out."""
    return " ".join(_read_html(body).text)


def _places(message: Message) -> List[str]:
    """Where a code is looked for, in order: the text body, the HTML's
    text, the subject."""
    places = [message.text_body or ""]
    if message.html_body:
        places.append(html_text(message.html_body))
    places.append(message.subject or "")
    return places


def code(message: Message, pattern: Union[str, Pattern[str], None] = None) -> Optional[str]:
    """The message's verification code, looked for in ``text_body``, then in
    the text of ``html_body``, then in ``subject``: a run of 4 to 8 digits
    within three words after a keyword (code, PIN, OTP, verification,
    one-time, passcode; any case), or before one ("482913 is your code");
    else the last run of exactly 6 digits; else the first run of 4 to 8.
    So "Order #2026 placed 2026-11-24 ... Your verification code is 482913"
    gives 482913. With ``pattern``: its first match (group 1 when it has a
    group) in the same places. ``None`` when nothing matches."""
    places = _places(message)
    if pattern is not None:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        for text in places:
            m = rx.search(text)
            if m:
                return m.group(1) if rx.groups else m.group(0)
        return None
    for rx in (_AFTER_KEYWORD, _BEFORE_KEYWORD):
        for text in places:
            m = rx.search(text)
            if m:
                return m.group(1)
    for text in places:
        six = _SIX.findall(text)
        if six:
            return six[-1]
    for text in places:
        m = DEFAULT_CODE_PATTERN.search(text)
        if m:
            return m.group(0)
    return None


def codes(message: Message) -> List[str]:
    """Every run of 4 to 8 digits, in order, of the first place that has
    one: ``text_body``, else the text of ``html_body``, else ``subject``
    (the places of :func:`code`). ``[]`` when there is none."""
    for text in _places(message):
        found = DEFAULT_CODE_PATTERN.findall(text)
        if found:
            return found
    return []

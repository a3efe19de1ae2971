"""Client-side helpers to read what a message holds: its links and a
verification code. The service extracts nothing; these are pure functions."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import List, Optional, Pattern, Union

from .models import Message

#: The default pattern of code(): a run of 4 to 8 digits on word boundaries.
DEFAULT_CODE_PATTERN = re.compile(r"\b\d{4,8}\b")

_URL = re.compile(r"""https?://[^\s<>"'`]+""", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""


class _HTMLReader(HTMLParser):
    """Collects the href attributes (unescaped by the parser) and the text
    (entities unescaped; script and style left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: List[str] = []
        self.text: List[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag in ("script", "style"):
            self._skip += 1
        for name, value in attrs:
            if name == "href" and value:
                self.hrefs.append(value.strip())

    def handle_startendtag(self, tag, attrs):  # type: ignore[no-untyped-def]
        for name, value in attrs:
            if name == "href" and value:
                self.hrefs.append(value.strip())

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if not self._skip:
            self.text.append(data)


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


def links(message: Message) -> List[str]:
    """Every http/https link in ``text_body`` and in the hrefs of
    ``html_body``, HTML-unescaped, in order of first appearance (text body
    first), each once."""
    found = _text_links(message.text_body)
    if message.html_body:
        for href in _read_html(message.html_body).hrefs:
            if re.match(r"https?://", href, re.IGNORECASE):
                found.append(html.unescape(href))
    seen = set()
    out = []
    for url in found:
        if url and url not in seen:
            seen.add(url)
            out.append(url)
    return out


def html_text(body: str) -> str:
    """The text of an HTML body: tags removed (each as a space, so cells and
    paragraphs stay apart), entities unescaped, script and style left out."""
    return " ".join(_read_html(body).text)


def code(message: Message, pattern: Union[str, Pattern[str], None] = None) -> Optional[str]:
    """The first match of ``pattern`` (default: 4 to 8 digits on word
    boundaries) in ``text_body``, then in the text of ``html_body``, then in
    ``subject``; group 1 when the pattern has a group. ``None`` when nothing
    matches."""
    rx = DEFAULT_CODE_PATTERN if pattern is None else (re.compile(pattern) if isinstance(pattern, str) else pattern)
    places = [message.text_body]
    if message.html_body:
        places.append(html_text(message.html_body))
    places.append(message.subject)
    for text in places:
        m = rx.search(text or "")
        if m:
            return m.group(1) if rx.groups else m.group(0)
    return None

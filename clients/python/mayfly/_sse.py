"""The parser of the text/event-stream format (the WHATWG HTML standard,
"Server-sent events"), fed chunks as they arrive. Pure logic: no I/O. Its
cases are clients/testdata/sse.json, run by tests/test_unit.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

_EOL = re.compile(r"[\r\n]")


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its type (``message`` when the stream named
    none), its data (the ``data`` lines joined by newlines) and its id (the
    last id set)."""

    event: str
    data: str
    id: str = ""


class SSEParser:
    """Feed it chunks of the stream (:meth:`push`); it returns the events
    each completes. A line ends at CRLF, LF or CR (also split between
    chunks). ``comments`` collects each comment line's text after the colon,
    in order (the reader may clear it); ``retry`` is the last valid
    ``retry`` field in ms (None while none came); unknown fields are
    ignored."""

    def __init__(self) -> None:
        self._buf = ""
        self._skip_lf = False  # the last chunk ended in CR: a LF first is its pair
        self._event = ""
        self._data: List[str] = []
        self._has_data = False
        self.last_id = ""
        self.retry: Optional[int] = None
        self.comments: List[str] = []

    def push(self, chunk: str) -> List[SSEEvent]:
        if not chunk:
            return []
        if self._skip_lf and chunk[0] == "\n":
            chunk = chunk[1:]
        self._skip_lf = False
        buf = self._buf + chunk
        out: List[SSEEvent] = []
        pos = 0
        while True:
            m = _EOL.search(buf, pos)
            if m is None:
                break
            i = m.start()
            line = buf[pos:i]
            if buf[i] == "\r":
                if i + 1 < len(buf):
                    pos = i + 2 if buf[i + 1] == "\n" else i + 1
                else:
                    pos, self._skip_lf = i + 1, True
            else:
                pos = i + 1
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        self._buf = buf[pos:]
        return out

    def feed(self, line: str) -> Optional[SSEEvent]:
        """One line (with or without its line ending); the event it ends,
        if any."""
        evs = self.push(line if line.endswith(("\n", "\r")) else line + "\n")
        return evs[-1] if evs else None

    def _line(self, line: str) -> Optional[SSEEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments.append(line[1:])
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id":
            if "\0" not in value:
                self.last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self.retry = int(value)
        return None

    def _dispatch(self) -> Optional[SSEEvent]:
        if not self._has_data:
            self._event = ""
            return None
        ev = SSEEvent(event=self._event or "message", data="\n".join(self._data), id=self.last_id)
        self._event, self._data, self._has_data = "", [], False
        return ev

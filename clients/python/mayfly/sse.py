"""A small parser of the text/event-stream format (the WHATWG HTML standard,
"Server-sent events"), fed one line at a time. Pure logic: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its type (``message`` when the stream named
    none), its data (the ``data`` lines joined by newlines) and its id."""

    event: str
    data: str
    id: str = ""


class SSEParser:
    """Feed it lines (with or without their line ending); it returns an
    :class:`SSEEvent` on each blank line that ends an event with data.
    Comments (``: ping``), ``retry`` and unknown fields are ignored."""

    def __init__(self) -> None:
        self._event = ""
        self._data: List[str] = []
        self._has_data = False
        self.last_id = ""

    def feed(self, line: str) -> Optional[SSEEvent]:
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
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
        return None

    def _dispatch(self) -> Optional[SSEEvent]:
        if not self._has_data:
            self._event = ""
            return None
        ev = SSEEvent(event=self._event or "message", data="\n".join(self._data), id=self.last_id)
        self._event, self._data, self._has_data = "", [], False
        return ev

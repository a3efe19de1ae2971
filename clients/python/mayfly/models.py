"""The API's resources as dataclasses (field names as in the API, except
``from_``: ``from`` is a Python keyword)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

#: The message states.
STATUS_PENDING = "pending"
STATUS_READY = "ready"
STATUS_FAILED = "failed"

#: The type of the one event the API defines.
EVENT_MESSAGE_RECEIVED = "message.received"


def parse_time(value: Any) -> Optional[datetime]:
    """An RFC 3339 timestamp as an aware datetime (``None`` for null)."""
    if value is None or value == "":
        return None
    s = str(value)
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    # Python < 3.11 accepts only 3 or 6 fractional digits.
    if "." in s:
        head, _, rest = s.partition(".")
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        digits = (digits + "000000")[:6]
        s = f"{head}.{digits}{rest}"
    t = datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


@dataclass(frozen=True)
class Mailbox:
    """An inbox as the API shows it."""

    id: str
    address: str
    kind: str = "temporary"
    expires_at: Optional[datetime] = None
    max_expires_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Mailbox":
        return cls(
            id=str(d["id"]),
            address=str(d["address"]),
            kind=str(d.get("kind", "temporary")),
            expires_at=parse_time(d.get("expires_at")),
            max_expires_at=parse_time(d.get("max_expires_at")),
        )


@dataclass(frozen=True)
class MessageSummary:
    """One item of the message list. ``to`` is the envelope recipient the
    message arrived for (lower-cased): a tagged address ``local+tag@domain``,
    or the inbox's own address (also when the service sends no ``to``)."""

    id: str
    from_: str
    subject: str
    received_at: Optional[datetime]
    status: str  # pending, ready or failed
    to: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any], address: str = "") -> "MessageSummary":
        """``address``: the inbox's, the ``to`` of a message the service
        sent without one."""
        return cls(
            id=str(d["id"]),
            from_=str(d.get("from", "")),
            subject=str(d.get("subject", "")),
            received_at=parse_time(d.get("received_at")),
            status=str(d.get("status", "")),
            to=str(d.get("to") or address).lower(),
        )


@dataclass(frozen=True)
class Message(MessageSummary):
    """One message with its bodies (set once ``status`` is ready).
    ``html_body`` is sanitized; render it isolated, never inline."""

    text_body: str = ""
    html_body: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any], address: str = "") -> "Message":
        s = MessageSummary.from_json(d, address)
        return cls(
            id=s.id,
            from_=s.from_,
            subject=s.subject,
            received_at=s.received_at,
            status=s.status,
            to=s.to,
            text_body=str(d.get("text_body", "")),
            html_body=str(d.get("html_body", "")),
        )


@dataclass(frozen=True)
class Page:
    """One page of the message list, newest first."""

    items: List[MessageSummary] = field(default_factory=list)
    limit: int = 0
    offset: int = 0
    has_more: bool = False


@dataclass(frozen=True)
class Event:
    """One event of an inbox's stream: ``type`` is ``message.received`` and
    ``message`` the new message's summary. ``missed`` is set for a message
    found by the list after a (re)connect rather than announced by the
    stream."""

    type: str
    message: MessageSummary
    missed: bool = False

"""Tagged addresses and recipients (clients/SCENARIOS.md, "Tagged addresses
and recipients"): mail to ``local+tag@domain`` lands in the inbox of
``local@domain`` and carries that address as its ``to``; a
:class:`Recipient` is an inbox seen through one such address, its waits
scoped to it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterator, List, Optional

from .models import Event, Message

if TYPE_CHECKING:
    from .client import Inbox

#: A tag: 1 to 64 of A-Z a-z 0-9 . _ - (and local+tag at most 64).
_TAG = re.compile(r"[A-Za-z0-9._-]{1,64}", re.ASCII)
MAX_LOCAL = 64


def address_for(address: str, tag: str) -> str:
    """``local+tag@domain`` of an inbox's ``local@domain``; ValueError for
    a tag the service would refuse at RCPT (no request is made)."""
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise ValueError(f"mayfly: tag {tag!r}: want 1 to 64 of A-Z a-z 0-9 . _ -")
    local, at, domain = address.rpartition("@")
    if not at or not local:
        raise ValueError(f"mayfly: {address!r} is not an address")
    if len(local) + 1 + len(tag) > MAX_LOCAL:
        raise ValueError(f"mayfly: tag {tag!r}: {local}+{tag} is over {MAX_LOCAL} characters")
    return f"{local}+{tag}@{domain}"


class Recipient:
    """One tagged address of an inbox: ``address``, ``tag``, ``inbox``, and
    the inbox's waits (:meth:`wait_for_message`, :meth:`wait_for_messages`,
    :meth:`expect_no_message`, :meth:`events`) scoped to that address: a
    scoped wait never returns another recipient's message, and
    :meth:`expect_no_message` is not failed by mail to another address.
    Every keyword of the inbox's methods is taken (``to`` excepted).
    Made by :meth:`Inbox.recipient` and :meth:`SharedInbox.recipient`."""

    def __init__(self, inbox: "Inbox", tag: str) -> None:
        self._inbox = inbox
        self._tag = tag
        self._address = address_for(inbox.address, tag)
        #: The default deadline of this recipient's waits (seconds; None:
        #: the inbox's client's): the runner fixture's.
        self.timeout: Optional[float] = None

    def __repr__(self) -> str:
        return f"<mayfly.Recipient {self._address}>"

    def __str__(self) -> str:
        return self._address

    @property
    def address(self) -> str:
        return self._address

    @property
    def tag(self) -> str:
        return self._tag

    @property
    def inbox(self) -> "Inbox":
        return self._inbox

    def _kw(self, kw: Any, deadline: bool = True) -> Any:
        if "to" in kw:
            raise TypeError("mayfly: a Recipient's waits are scoped to its address: no to=")
        kw["to"] = self._address
        if deadline and kw.get("timeout") is None and self.timeout is not None:
            kw["timeout"] = self.timeout
        return kw

    def wait_for_message(self, **kw: Any) -> Message:
        """:meth:`Inbox.wait_for_message` scoped to this address."""
        return self._inbox.wait_for_message(**self._kw(kw))

    def wait_for_messages(self, count: int, **kw: Any) -> List[Message]:
        """:meth:`Inbox.wait_for_messages` scoped to this address."""
        return self._inbox.wait_for_messages(count, **self._kw(kw))

    def expect_no_message(self, within: float, **kw: Any) -> None:
        """:meth:`Inbox.expect_no_message` scoped to this address."""
        return self._inbox.expect_no_message(within, **self._kw(kw, deadline=False))

    def events(self, **kw: Any) -> Iterator[Event]:
        """:meth:`Inbox.events` scoped to this address."""
        return self._inbox.events(**self._kw(kw))

"""The shared inbox (clients/SCENARIOS.md, "Shared inboxes: test suites
under the public limits"): one inbox for many tests, each test its own
tagged address, so a suite spends one creation per worker per hour where an
inbox per test would spend a day's creations (20 per IP) in 20 tests."""

from __future__ import annotations

import re
import secrets
import string
import threading
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._recipient import MAX_LOCAL, Recipient
from .errors import InboxGoneError

if TYPE_CHECKING:
    from .client import Client, Inbox

#: How close to its expiry (or to its 60-minute cap) the inbox may come
#: before a hand-out extends (or replaces) it.
MARGIN = timedelta(minutes=5)
#: The random part of a tag: never repeated, across runs too.
_RANDOM = 10
_ALPHABET = string.ascii_lowercase + string.digits
_UNSAFE = re.compile(r"[^a-z0-9]+")


def safe_tag(name: str, room: int) -> str:
    """The tag of a recipient named ``name``: lower case, every run of
    other characters than a-z 0-9 one ``-`` (none at either end), cut to
    leave room for ``-`` and 10 random characters within ``room``, then
    those."""
    rand = "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM))
    safe = _UNSAFE.sub("-", name.lower()).strip("-")
    safe = safe[: max(0, room - _RANDOM - 1)].strip("-")
    return f"{safe}-{rand}" if safe else rand


class SharedInbox:
    """One inbox that hands out a :class:`Recipient` per test.

    ``recipient(name)`` gives a tagged address made from ``name`` plus 10
    random characters (never repeated, across runs too: the app under test
    keeps its users). The inbox is created at the first ``recipient()``
    (one creation; a :class:`CreationLimitError` is raised as it is, never
    retried, unless ``wait_for_capacity``); before each hand-out it is
    extended when it expires within 5 minutes, and replaced (one new
    creation, the old one deleted) when its 60-minute cap
    (``max_expires_at``) is within 5 minutes. :meth:`close` deletes it; it
    is also a context manager.

    ``lifetime_minutes``, ``wait_for_capacity`` and ``timeout`` are
    :meth:`Client.create_inbox`'s; ``clock`` (a callable returning an aware
    datetime, default the system clock) is the time the hand-outs compare
    with the inbox's expiry. Safe to use from several threads."""

    def __init__(
        self,
        client: "Client",
        *,
        lifetime_minutes: Optional[int] = None,
        wait_for_capacity: bool = False,
        timeout: Optional[float] = None,
        clock: Optional[Callable[[], datetime]] = None,
    ) -> None:
        self._client = client
        self._lifetime = lifetime_minutes
        self._capacity = wait_for_capacity
        self._timeout = timeout
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._lock = threading.Lock()
        self._inbox: Optional["Inbox"] = None
        self._closed = False
        #: How many inboxes this shared inbox has created.
        self.creations = 0

    def __repr__(self) -> str:
        return f"<mayfly.SharedInbox {self._inbox.address if self._inbox else '(none yet)'}>"

    def __enter__(self) -> "SharedInbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def inbox(self) -> Optional["Inbox"]:
        """The inbox now handing out recipients (None before the first)."""
        return self._inbox

    def recipient(self, name: str = "") -> Recipient:
        """A new tagged address on the shared inbox (see the class)."""
        with self._lock:
            if self._closed:
                raise ValueError("mayfly: the shared inbox is closed")
            inbox = self._ready()
            local = inbox.address.rpartition("@")[0]
            return Recipient(inbox, safe_tag(name, MAX_LOCAL - len(local) - 1))

    def _ready(self) -> "Inbox":
        ib = self._inbox
        if ib is not None and not ib.gone:
            now = self._clock()
            mb = ib.mailbox
            if mb.max_expires_at is not None and mb.max_expires_at - now <= MARGIN:
                ib.delete()  # first: the old one's place under the active-inbox cap
                ib = None
            elif mb.expires_at is not None and mb.expires_at - now <= MARGIN:
                try:
                    ib.extend(10)  # the service grants what its cap allows
                except InboxGoneError:
                    ib = None  # it expired in between: a new one
        if ib is None or ib.gone:
            ib = self._client.create_inbox(self._lifetime, wait_for_capacity=self._capacity, timeout=self._timeout)
            self.creations += 1
            self._inbox = ib
        return ib

    def close(self) -> None:
        """Deletes the inbox (idempotent)."""
        with self._lock:
            self._closed = True
            ib, self._inbox = self._inbox, None
        if ib is not None:
            ib.delete()

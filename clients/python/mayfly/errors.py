"""The one exception hierarchy of the client: every error it raises is a
:class:`MayflyError` (``except MayflyError`` catches them all)."""

from __future__ import annotations

from typing import Any, Dict, Optional

#: The codes of the limits on creating inboxes (never retried).
CREATION_LIMIT_CODES = frozenset({"CREATION_RATE_LIMITED", "ACTIVE_INBOX_LIMIT", "GLOBAL_CREATION_LIMIT"})


class MayflyError(Exception):
    """An error of the client or of the API.

    For an API error answer, ``status`` is the HTTP status, ``code`` the stable
    ``error.code``, ``message`` the ``error.message``, ``request_id`` the id to
    quote when reporting a problem, ``details`` the free-form ``error.details``
    and ``retry_after`` the wait the service asked for (``Retry-After``, in
    seconds) or ``None``. For an error without an answer (a refused
    connection, a timeout) ``status`` is 0 and ``code`` is empty.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        request_id: str = "",
        details: Optional[Dict[str, Any]] = None,
        retry_after: Optional[float] = None,
        method: str = "",
        url: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details: Dict[str, Any] = details or {}
        self.retry_after = retry_after
        #: The call that failed: the HTTP method and URL (never a cookie),
        #: or for a wait the client method and the base URL.
        self.method = method
        self.url = url

    def __str__(self) -> str:
        text = "mayfly: "
        where = " ".join(p for p in (self.method, self.url) if p)
        if where:
            text += where + ": "
        head = " ".join(p for p in (str(self.status) if self.status else "", self.code) if p)
        if head:
            text += head + ": "
        text += self.message
        if self.request_id:
            text += f" (request {self.request_id})"
        return text

    def _copy_into(self, cls: type, message: Optional[str] = None) -> "MayflyError":
        """The same API error as another kind."""
        e = cls(
            message if message is not None else self.message,
            status=self.status,
            code=self.code,
            request_id=self.request_id,
            details=dict(self.details),
            retry_after=self.retry_after,
            method=self.method,
            url=self.url,
        )
        for k, v in vars(self).items():
            if k not in vars(e):
                setattr(e, k, v)
        return e


class SessionInvalidError(MayflyError):
    """The service no longer accepts the inbox's session. Raised as an
    :class:`InboxGoneError` (a subclass): a gone inbox is also a session
    that is invalid, in all three clients; ``code`` says which answer it
    was (``MAILBOX_SESSION_INVALID``, ...)."""


class InboxGoneError(SessionInvalidError):
    """The inbox was deleted (by this client: then no request is sent), or
    the service no longer accepts it: any 401 to a call made with the
    inbox's cookies (``MAILBOX_SESSION_INVALID`` after expiry or a deletion
    by another copy of the jar, a refused scoped cookie on select, ...), or
    404 ``MAILBOX_NOT_FOUND`` to select. It cannot be recovered: create a new
    inbox. Every method of a gone inbox raises it (:meth:`Inbox.delete`
    excepted, which returns False). It is also a
    :class:`SessionInvalidError`."""


class CreationLimitError(MayflyError):
    """A limit on creating inboxes (``CREATION_RATE_LIMITED``,
    ``ACTIVE_INBOX_LIMIT``, ``GLOBAL_CREATION_LIMIT``). Never retried:
    ``retry_after`` says how long to wait when the service said so; for the
    active-inbox cap, delete an inbox you own."""


class RateLimitedError(MayflyError):
    """A 429 that is not a creation limit (``RATE_LIMITED``, or any other
    code or none) still refused the call after the retries the call allows,
    or its deadline came first."""


class MessageNotFoundError(MayflyError):
    """``MESSAGE_NOT_FOUND``: no such message in this inbox (a
    :meth:`Inbox.message` of an unknown id, or a wait's ``since`` naming a
    message the inbox does not hold)."""


class UnexpectedMessageError(MayflyError):
    """:meth:`Inbox.expect_no_message` found a matching message within its
    window; ``received`` is that message (a :class:`Message`)."""

    received: Any = None


class WaitTimeoutError(MayflyError, TimeoutError):
    """A wait (or ``events()``) reached its deadline without a matching
    message (also a :class:`TimeoutError`). Its message says why: the server
    unreachable (the last error, for how long), or how many messages
    arrived and matched none (the first one's subject), or that none
    arrived."""


class StreamBusyError(MayflyError):
    """An event stream (``events()`` or ``wait_for_message``) of this inbox is
    already running: the API asks for one stream per inbox."""


class CancelledError(MayflyError):
    """The call was cancelled through its ``cancel`` event."""


class TransportError(MayflyError):
    """No usable answer: the connection was refused, reset or timed out (the
    cause is chained as ``__cause__``). ``status`` is 0."""


class UnreachableError(TransportError):
    """A wait or ``events()`` gave up early: every attempt failed at the
    transport level (refused, reset, timed out, no HTTP answer) for the
    client's ``unreachable_after`` (10 s) in a row. The message names the URL
    and the last error (chained as ``__cause__``); ``unreachable_for`` is
    how long every attempt had failed, in seconds."""

    unreachable_for: float = 0.0


class ProtocolError(MayflyError):
    """An answer the client cannot read (not the API's envelope)."""


#: The way out a creation-limit error names (clients/SCENARIOS.md).
WAY_OUT = ("a test suite can share one inbox and give each test its own address "
           "(a shared inbox and tagged addresses: see the client's README)")


def explain_creation_limit(e: MayflyError) -> str:
    """The message of a creation-limit error: the service's, then the
    window (the service's ``details.window``, else read from Retry-After:
    up to 60 s the minute, up to 3600 s the hour, else the day), the wait,
    and the way out (clients/SCENARIOS.md)."""
    ra = e.retry_after
    if e.code == "ACTIVE_INBOX_LIMIT":
        what = "this IP's active-inbox cap is reached (delete an inbox it owns, or wait for one to expire)"
    elif e.code == "GLOBAL_CREATION_LIMIT":
        what = "the service's global creation cap is reached"
    else:
        window = e.details.get("window") if isinstance(e.details.get("window"), str) else None
        if not window and ra is not None:
            window = "minute" if ra <= 60 else "hour" if ra <= 3600 else "day"
        what = f"this IP's {window} of creations is spent" if window else "this IP's creation window is spent"
    text = e.message.rstrip(". ") + "; " if e.message else ""
    text += what
    if ra is not None:
        text += f"; retry in {ra:g} s"
    return f"{text}; {WAY_OUT}"

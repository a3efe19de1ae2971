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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details: Dict[str, Any] = details or {}
        self.retry_after = retry_after

    def __str__(self) -> str:
        parts = []
        if self.status:
            parts.append(str(self.status))
        if self.code:
            parts.append(self.code)
        head = " ".join(parts)
        text = f"mayfly: {head}: {self.message}" if head else f"mayfly: {self.message}"
        if self.request_id:
            text += f" (request {self.request_id})"
        return text

    def _copy_into(self, cls: type, message: Optional[str] = None) -> "MayflyError":
        """The same API error as another kind."""
        return cls(
            message if message is not None else self.message,
            status=self.status,
            code=self.code,
            request_id=self.request_id,
            details=dict(self.details),
            retry_after=self.retry_after,
        )


class InboxGoneError(MayflyError):
    """The inbox was deleted (by this client: then no request is sent), or
    the service no longer accepts it: any 401 to a call made with the
    inbox's cookies (``MAILBOX_SESSION_INVALID`` after expiry or a deletion
    by another copy of the jar, a refused scoped cookie on select, ...), or
    404 ``MAILBOX_NOT_FOUND`` to select. It cannot be recovered: create a new
    inbox. Every method of a gone inbox raises it."""


class CreationLimitError(MayflyError):
    """A limit on creating inboxes (``CREATION_RATE_LIMITED``,
    ``ACTIVE_INBOX_LIMIT``, ``GLOBAL_CREATION_LIMIT``). Never retried:
    ``retry_after`` says how long to wait when the service said so; for the
    active-inbox cap, delete an inbox you own."""


class RateLimitedError(MayflyError):
    """The request rate (429 ``RATE_LIMITED``) still refused the call after the
    retries the call allows, or its deadline came first."""


class SessionInvalidError(MayflyError):
    """The service answered 401 to the inbox's cookies (its session, or its
    scoped cookie on select). Such an inbox is gone: the error raised is an
    :class:`InboxGoneError` that is also a SessionInvalidError; ``code``
    says which 401 it was."""


class WaitTimeoutError(MayflyError, TimeoutError):
    """A wait reached its deadline without a matching message (also a
    :class:`TimeoutError`)."""


class StreamBusyError(MayflyError):
    """An event stream (``events()`` or ``wait_for_message``) of this inbox is
    already running: the API asks for one stream per inbox."""


class CancelledError(MayflyError):
    """The call was cancelled through its ``cancel`` event."""


class TransportError(MayflyError):
    """No usable answer: the connection was refused, reset or timed out (the
    cause is chained as ``__cause__``). ``status`` is 0."""


class ProtocolError(MayflyError):
    """An answer the client cannot read (not the API's envelope)."""

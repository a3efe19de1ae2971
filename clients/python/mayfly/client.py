"""The client and its options: :class:`Client` talks to one service, each
:class:`Inbox` (_inbox.py) holds the cookie jar of one inbox. Standard
library only. Every name importable from here before the client was split
into its parts still is."""

from __future__ import annotations

import http.client
import http.cookiejar
import logging
import random
import ssl
import urllib.parse
from typing import Any, Callable, Dict, Optional, Tuple, Union

from . import _jar, _retry, _state, _transport
from ._ctx import Cancel, Ctx
from ._inbox import Inbox
from ._jar import new_jar
from ._recipient import Recipient
from ._shared import SharedInbox
from ._state import STATE_VERSION
from ._transport import RetryInfo
from ._wait import Regex, Since
from .errors import CreationLimitError
from .models import Mailbox

__all__ = ["Client", "Inbox", "Recipient", "SharedInbox", "RetryInfo", "new_jar", "Since", "Regex",
           "MIN_POLL_INTERVAL", "DEFAULT_WAIT_TIMEOUT", "DEFAULT_UNREACHABLE_AFTER", "STATE_VERSION",
           "REPLACED_PAUSE"]

log = logging.getLogger("mayfly")

#: The API's floor for polling the message list, in seconds.
MIN_POLL_INTERVAL = 5.0

#: The default deadline of a wait (and of ``events()``), in seconds, when the
#: caller gives none: the same in the Go, TypeScript and Python clients.
DEFAULT_WAIT_TIMEOUT = 20.0

#: After how many seconds of transport failures in a row (every attempt
#: refused, reset or timed out) a wait gives up with UnreachableError.
DEFAULT_UNREACHABLE_AFTER = 10.0

#: How long a stream that the service ended because another stream took the
#: inbox over (the comment ``: replaced ...``) polls the list before it opens
#: the stream again, in seconds (clients/SCENARIOS.md).
REPLACED_PAUSE = 60.0


class Client:
    """A client of one Mayfly service (or any service that follows its API).

    ``base_url`` includes the version prefix, e.g.
    ``http://127.0.0.1:8080/v1``. Safe to use from several threads; each
    :class:`Inbox` made from it has a cookie jar of its own.

    - ``timeout``: the default deadline of one call, retries included, in
      seconds (every method also takes ``timeout=``);
    - ``wait_timeout``: the default deadline of the waits and of
      ``events()`` (20 s; ``None``: no deadline);
    - ``unreachable_after``: a wait or ``events()`` whose every attempt has
      failed at the transport level for this long (10 s) raises
      :class:`UnreachableError` before its deadline (``None``: never);
    - ``max_attempts``: attempts of one call in all (waits and streams have
      no cap, only their deadline);
    - ``max_retry_after``: a longer ``Retry-After`` (10 s) is not waited
      out: the error is raised at once, whatever its status;
    - ``poll_interval``: polling of the message list when the event stream
      is unavailable (never below 5 s);
    - ``stream_open_timeout`` / ``stream_idle_timeout``: how long opening the
      event stream may take, and how long an open stream may stay silent (no
      event, no heartbeat) before it is reconnected;
    - ``on_retry``: called with a :class:`RetryInfo` before each retry.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        wait_timeout: Optional[float] = DEFAULT_WAIT_TIMEOUT,
        unreachable_after: Optional[float] = DEFAULT_UNREACHABLE_AFTER,
        max_attempts: int = 6,
        max_retry_after: float = 10.0,
        poll_interval: float = MIN_POLL_INTERVAL,
        stream_open_timeout: float = 10.0,
        stream_idle_timeout: float = 65.0,
        user_agent: str = "mayfly-python-client/0.1",
        ssl_context: Optional[ssl.SSLContext] = None,
        on_retry: Optional[Callable[[RetryInfo], None]] = None,
    ) -> None:
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"mayfly: base URL {base_url!r}: want http(s)://host/v1")
        self.base_url = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, "", ""))
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path
        self.timeout = timeout
        self.wait_timeout = wait_timeout
        self.unreachable_after = unreachable_after
        self.max_attempts = max(1, max_attempts)
        self.max_retry_after = max_retry_after
        self.poll_interval = max(poll_interval, MIN_POLL_INTERVAL)
        self._replaced_pause = REPLACED_PAUSE
        self.stream_open_timeout = stream_open_timeout
        self.stream_idle_timeout = stream_idle_timeout
        self.user_agent = user_agent
        self._ssl = ssl_context
        self.on_retry = on_retry

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    @property
    def _policy(self) -> _retry.Policy:
        return _retry.Policy(max_attempts=self.max_attempts, max_retry_after=self.max_retry_after)

    # Inboxes.

    def create_inbox(
        self,
        lifetime_minutes: Optional[int] = None,
        *,
        wait_for_capacity: bool = False,
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> "Inbox":
        """Creates an inbox living ``lifetime_minutes`` (1 to 10; ``None``: the
        service's default) and selects it in a new cookie jar.

        Creation is retried only when the service refused it before doing
        anything (request rate, request protection, a refused connection);
        a creation limit raises :class:`CreationLimitError` at once, unless
        ``wait_for_capacity``: then it waits out the limit's ``Retry-After``
        (for the active-inbox cap: tries again every second) and raises the
        error only when the next try would pass ``timeout``."""
        body: Dict[str, Any] = {}
        if lifetime_minutes is not None:
            body["lifetime_minutes"] = int(lifetime_minutes)
        inbox = Inbox(self, _jar.new_jar())
        ctx = self._ctx(timeout, cancel)
        with ctx:
            while True:
                try:
                    data = self._call(inbox._core.jar, "POST", "/mailboxes", body, _retry.CREATE, ctx)
                    break
                except CreationLimitError as e:
                    if not wait_for_capacity:
                        raise
                    wait = 1.0 if e.code == "ACTIVE_INBOX_LIMIT" or e.retry_after is None else e.retry_after
                    wait += random.uniform(0, 0.25)
                    log.debug("mayfly: %s; waiting %.1fs for capacity", e.code, wait)
                    if not ctx.sleep(wait):
                        raise
            inbox._core.mailbox = Mailbox.from_json(_transport.field(data, "mailbox"))
            inbox._check_scoped_cookie()
            inbox._select(ctx)
        return inbox

    def restore(self, state: Union[str, bytes, Dict[str, Any]]) -> "Inbox":
        """The inbox of a state that :meth:`Inbox.state` (or the Go or
        TypeScript client's) wrote: its cookies, its mailbox and the ids it
        has seen, in the shared JSON format (clients/SCENARIOS.md). Makes no
        request. The state's ``base`` must be this client's base URL (the
        cookies belong to that host). A state marked gone restores an inbox
        whose every method raises :class:`InboxGoneError`."""
        return Inbox._of(_state.restore(self, state))

    # Requests.

    def _ctx(self, timeout: Optional[float], cancel: Cancel) -> Ctx:
        return Ctx(self.timeout if timeout is None else timeout, cancel)

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(self, jar: http.cookiejar.CookieJar, method: str, path: str, body: Optional[bytes], ctx: Ctx,
              accept: str, timeout: float) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """One request with the jar's cookies (_transport.py)."""
        return _transport.send(self, jar, method, path, body, ctx, accept, timeout)

    def _call(self, jar: http.cookiejar.CookieJar, method: str, path: str, payload: Optional[Dict[str, Any]],
              kind: str, ctx: Ctx) -> Any:
        """One API call with the retries its kind allows (_transport.py)."""
        return _transport.call(self, jar, method, path, payload, kind, ctx)


def _retry_after(value: Optional[str]) -> Optional[float]:
    """A Retry-After header's seconds (_retry.parse_retry_after)."""
    return _retry.parse_retry_after(value)


def _backoff(attempt: int) -> float:
    """The wait before retry number ``attempt`` (_retry.backoff)."""
    return _retry.backoff(attempt)

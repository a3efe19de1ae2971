"""The client: :class:`Client` talks to one service, each :class:`Inbox` holds
the cookie jar of one inbox. Standard library only."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import logging
import random
import re
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Pattern, Set, Tuple, Union

from ._ctx import Cancel, Ctx
from .errors import (
    CREATION_LIMIT_CODES,
    CancelledError,
    CreationLimitError,
    InboxGoneError,
    MayflyError,
    ProtocolError,
    RateLimitedError,
    SessionInvalidError,
    StreamBusyError,
    TransportError,
    WaitTimeoutError,
)
from .models import (
    EVENT_MESSAGE_RECEIVED,
    STATUS_PENDING,
    Event,
    Mailbox,
    Message,
    MessageSummary,
    Page,
)
from .sse import SSEParser


class _SessionGoneError(InboxGoneError, SessionInvalidError):
    """The inbox gone because the service answered 401 to its cookies."""

log = logging.getLogger("mayfly")

#: The API's floor for polling the message list, in seconds.
MIN_POLL_INTERVAL = 5.0

#: How long a stream that the service ended because another stream took the
#: inbox over (the comment ``: replaced ...``) polls the list before it opens
#: the stream again, in seconds (clients/SCENARIOS.md).
REPLACED_PAUSE = 60.0

_MAX_BODY = 64 << 20
_MAX_LINE = 1 << 20

# What a call may retry (SCENARIOS.md, "Retries").
_CREATE = "create"  # POST /mailboxes: refusals only
_WRITE = "write"  # select, PATCH, DELETE: refusals only
_READ = "read"  # GET: also 500/503 and a failure after sending

Since = Union[str, datetime, MessageSummary]
Regex = Union[str, Pattern[str], None]


@dataclass(frozen=True)
class RetryInfo:
    """What the ``on_retry`` hook of :class:`Client` is told before each
    retry: the call (path without its query), the attempt that failed
    (1, 2, ...), the wait before the next, and the failure (an API error's
    status and code, or status 0 for a connection failure)."""

    method: str
    path: str
    attempt: int
    wait: float
    status: int
    code: str
    error: str


class _NotSent(Exception):
    """The connection could not be made: nothing was sent."""


class _Sent(Exception):
    """The request was (maybe) sent, and no answer was read."""


class _Response:
    """What http.cookiejar needs of a response."""

    def __init__(self, resp: http.client.HTTPResponse) -> None:
        self._resp = resp

    def info(self) -> Any:
        return self._resp.msg


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _backoff(attempt: int, base: float = 0.2, cap: float = 5.0) -> float:
    """Full jitter over an exponentially growing ceiling: the wait before
    retry number ``attempt`` (1, 2, ...)."""
    ceiling = min(cap, base * (2 ** min(attempt - 1, 30)))
    return random.uniform(0, ceiling)


def _compile(rx: Regex) -> Optional[Pattern[str]]:
    if rx is None:
        return None
    return re.compile(rx) if isinstance(rx, str) else rx


def _transient(e: BaseException) -> bool:
    """Errors a wait or a stream outlives (until its deadline)."""
    if isinstance(e, (InboxGoneError, CancelledError, StreamBusyError, CreationLimitError)):
        return False
    if isinstance(e, (TransportError, RateLimitedError, ProtocolError)):
        return True
    return isinstance(e, MayflyError) and (e.status >= 500 or e.status == 429)


class Client:
    """A client of one Mayfly service (or any service that follows its API).

    ``base_url`` includes the version prefix, e.g.
    ``http://127.0.0.1:8080/v1``. Safe to use from several threads; each
    :class:`Inbox` made from it has a cookie jar of its own.

    - ``timeout``: the default deadline of one call, retries included, in
      seconds (every method also takes ``timeout=``);
    - ``wait_timeout``: the default deadline of ``wait_for_message``;
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
        wait_timeout: Optional[float] = 60.0,
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

    # Inboxes.

    def create_inbox(
        self,
        lifetime_minutes: Optional[int] = None,
        *,
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> "Inbox":
        """Creates an inbox living ``lifetime_minutes`` (1 to 10; ``None``: the
        service's default) and selects it in a new cookie jar.

        Creation is retried only when the service refused it before doing
        anything (request rate, request protection, a refused connection);
        a creation limit raises :class:`CreationLimitError` at once."""
        body: Dict[str, Any] = {}
        if lifetime_minutes is not None:
            body["lifetime_minutes"] = int(lifetime_minutes)
        inbox = Inbox(self, new_jar())
        ctx = self._ctx(timeout, cancel)
        with ctx:
            data = self._call(inbox._jar, "POST", "/mailboxes", body, _CREATE, ctx)
            mb = Mailbox.from_json(_field(data, "mailbox"))
            inbox._mailbox = mb
            inbox._check_scoped_cookie()
            inbox._select(ctx)
        return inbox

    # Requests.

    def _ctx(self, timeout: Optional[float], cancel: Cancel) -> Ctx:
        return Ctx(self.timeout if timeout is None else timeout, cancel)

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(
        self,
        jar: http.cookiejar.CookieJar,
        method: str,
        path: str,
        body: Optional[bytes],
        ctx: Ctx,
        accept: str,
        timeout: float,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """One request with the jar's cookies. Raises _NotSent or _Sent."""
        req = urllib.request.Request(self._url(path), method=method)
        jar.add_cookie_header(req)
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        cookie = req.get_header("Cookie")
        if cookie:
            headers["Cookie"] = cookie
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn = self._connection(ctx.socket_timeout(timeout))
        ctx.attach(conn)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise _NotSent(e) from e
            # http.client forgets the socket of a "Connection: close" answer
            # (the response keeps it): the watchdog and the stream need it.
            conn._mayfly_sock = conn.sock  # type: ignore[attr-defined]
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise _Sent(e) from e
        except BaseException:
            ctx.detach(conn)
            conn.close()
            raise
        jar.extract_cookies(_Response(resp), req)  # type: ignore[arg-type]
        return conn, resp

    def _call(
        self,
        jar: http.cookiejar.CookieJar,
        method: str,
        path: str,
        payload: Optional[Dict[str, Any]],
        kind: str,
        ctx: Ctx,
    ) -> Any:
        """One API call with the retries its kind allows (SCENARIOS.md,
        "Retries"); returns the data envelope's content (None for 204)."""
        body = None if payload is None else json.dumps(payload).encode()
        attempt = 0
        while True:
            attempt += 1
            ctx.check_cancel()
            retry = False
            wait = 0.0
            err: MayflyError
            try:
                conn, resp = self._send(jar, method, path, body, ctx, "application/json", self.timeout)
                try:
                    raw = resp.read(_MAX_BODY)
                except (OSError, http.client.HTTPException) as e:
                    raise _Sent(e) from e
                finally:
                    ctx.detach(conn)
                    resp.close()
                    conn.close()
            except _NotSent as e:
                ctx.check_cancel()
                err = TransportError(f"{method} {_route(path)}: {e.__cause__}")
                err.__cause__ = e.__cause__
                # Nothing was sent: any call may try again, but a
                # certificate that does not verify will not start to.
                retry, wait = not isinstance(e.__cause__, ssl.SSLCertVerificationError), _backoff(attempt)
            except _Sent as e:
                ctx.check_cancel()
                err = TransportError(f"{method} {_route(path)}: {e.__cause__ or 'no answer'}")
                err.__cause__ = e.__cause__
                retry, wait = kind == _READ and not ctx.expired(), _backoff(attempt)
            else:
                if 200 <= resp.status < 300:
                    if resp.status == 204 or not raw:
                        return None
                    try:
                        env = json.loads(raw)
                        return env["data"]
                    except (ValueError, KeyError, TypeError) as e:
                        raise ProtocolError(f"answer {resp.status} without a data envelope", status=resp.status) from e
                err = _api_error(resp, raw)
                ra = err.retry_after
                if err.code in CREATION_LIMIT_CODES:
                    raise err._copy_into(CreationLimitError)
                if resp.status == 429 and (err.code == "RATE_LIMITED" or ra is not None):
                    err = err._copy_into(RateLimitedError)
                    retry = ra is None or ra <= self.max_retry_after
                    wait = (1.0 if ra is None else ra) + random.uniform(0, 0.25)
                elif resp.status == 503 and err.code == "REQUEST_PROTECTION":
                    retry = ra is None or ra <= self.max_retry_after
                    wait = (1.0 if ra is None else ra) + random.uniform(0, 0.25)
                elif resp.status in (500, 502, 503, 504) and kind == _READ:
                    retry = ra is None or ra <= self.max_retry_after
                    wait = _backoff(attempt)
                    if ra is not None and wait < ra:
                        wait = ra
            if not retry or attempt >= self.max_attempts:
                raise err
            info = RetryInfo(method, _route(path), attempt, wait, err.status, err.code, str(err))
            log.debug("mayfly: retrying %s %s after %s (attempt %d, wait %.2fs)", method, info.path,
                      err.code or err.status or "a connection failure", attempt, wait)
            rem = ctx.remaining()
            if rem is not None and wait >= rem:
                raise err
            if self.on_retry is not None:
                self.on_retry(info)
            ctx.sleep(wait)


def new_jar() -> http.cookiejar.CookieJar:
    """The cookie jar of one inbox. The API's cookies are host-only (no
    Domain); http.cookiejar's default policy would send such a cookie to
    the host's subdomains as well: DomainStrictNonDomain keeps it to its
    host. Secure cookies go over https only (the default policy)."""
    policy = http.cookiejar.DefaultCookiePolicy(strict_ns_domain=http.cookiejar.DefaultCookiePolicy.DomainStrictNonDomain)
    return http.cookiejar.CookieJar(policy)


def _route(path: str) -> str:
    """The path without its query: what logs and errors show."""
    return path.split("?", 1)[0]


def _field(data: Any, name: str) -> Dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get(name), dict):
        raise ProtocolError(f"answer without data.{name}")
    return data[name]


def _api_error(resp: http.client.HTTPResponse, raw: bytes) -> MayflyError:
    code, message, details, rid = "", "", None, resp.getheader("X-Request-ID", "") or ""
    try:
        env = json.loads(raw)
        e = env.get("error") or {}
        code = str(e.get("code") or "")
        message = str(e.get("message") or "")
        details = e.get("details") if isinstance(e.get("details"), dict) else None
        rid = str(env.get("request_id") or rid)
    except (ValueError, AttributeError):
        pass
    return MayflyError(
        message or resp.reason or f"HTTP {resp.status}",
        status=resp.status,
        code=code,
        request_id=rid,
        details=details,
        retry_after=_retry_after(resp.getheader("Retry-After")),
    )


class Inbox:
    """One inbox with the cookie jar that gives access to it (one jar per
    inbox, never shared: a jar is a security boundary). Safe to use from
    several threads, but it runs one event stream at a time.

    Every method takes ``timeout=`` (seconds; the call's deadline, retries
    included) and ``cancel=`` (a :class:`threading.Event`, or a callable
    that returns True once the call is to end: setting it ends the call at
    once with :class:`CancelledError`). After :meth:`delete`, or
    once the service no longer accepts the inbox, every method raises
    :class:`InboxGoneError`. Used as a context manager, the inbox is deleted
    at the end of the block."""

    def __init__(self, client: Client, jar: http.cookiejar.CookieJar) -> None:
        self._client = client
        self._jar = jar
        self._mailbox: Optional[Mailbox] = None
        self._lock = threading.Lock()
        self._stream = threading.Lock()
        self._gone: Optional[InboxGoneError] = None
        self._returned: Set[str] = set()

    def __repr__(self) -> str:
        return f"<mayfly.Inbox {self.address}>"

    def __enter__(self) -> "Inbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except InboxGoneError:
            pass

    @property
    def mailbox(self) -> Mailbox:
        """The inbox as last seen (creation, select, current, extend)."""
        assert self._mailbox is not None
        return self._mailbox

    @property
    def address(self) -> str:
        return self.mailbox.address

    @property
    def id(self) -> str:
        return self.mailbox.id

    @property
    def gone(self) -> bool:
        """Whether the inbox is known to be gone (deleted or expired)."""
        return self._gone is not None

    # Calls.

    def _check_gone(self) -> None:
        g = self._gone
        if g is not None:
            raise g._copy_into(type(g))

    def _mark_gone(self, e: MayflyError, hint: str = "") -> InboxGoneError:
        """The gone error for e, the answer that showed it (a 401 is also a
        SessionInvalidError); the first one is kept for every later call."""
        if isinstance(e, InboxGoneError):
            g = e
        else:
            cls = _SessionGoneError if e.status == 401 else InboxGoneError
            g = e._copy_into(cls, f"inbox expired or deleted: {e.message}{hint}")
        with self._lock:
            if self._gone is None:
                self._gone = g  # type: ignore[assignment]
        return g  # type: ignore[return-value]

    def _do(self, method: str, path: str, payload: Optional[Dict[str, Any]], kind: str, ctx: Ctx) -> Any:
        """A call with the inbox's cookies: any 401 means the inbox is gone."""
        self._check_gone()
        try:
            return self._client._call(self._jar, method, path, payload, kind, ctx)
        except MayflyError as e:
            if e.status == 401 and not isinstance(e, InboxGoneError):
                raise self._mark_gone(e) from None
            raise

    def _check_scoped_cookie(self) -> None:
        suffix = "_" + self.id.replace("-", "").lower()
        for c in self._jar:
            if c.name.lower().endswith(suffix) and len(suffix) == 33:
                return
        raise ProtocolError(
            f"no mailbox-scoped cookie in the creation answer of {self.id} "
            "(a service on plain http must issue cookies without Secure: MAYFLY_COOKIE_SECURE=false)"
        )

    def _select(self, ctx: Ctx) -> Mailbox:
        self._check_gone()
        try:
            data = self._client._call(self._jar, "POST", f"/mailboxes/{urllib.parse.quote(self.id)}/select", None, _WRITE, ctx)
        except MayflyError as e:
            if e.status == 404 and e.code in ("MAILBOX_NOT_FOUND", ""):
                raise self._mark_gone(e) from None
            if e.status == 401 and not isinstance(e, InboxGoneError):
                # Select is made with the inbox's cookies (the scoped one):
                # any 401 is gone, like a 401 to the session.
                hint = ""
                if self._client._scheme == "http" and any(c.secure for c in self._jar):
                    hint = " (the service set Secure cookies over plain http: set MAYFLY_COOKIE_SECURE=false)"
                raise self._mark_gone(e, hint) from None
            raise
        self._mailbox = Mailbox.from_json(_field(data, "mailbox"))
        return self._mailbox

    def select(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """Opens a new session on the inbox with its scoped cookie (creation
        already did)."""
        with self._client._ctx(timeout, cancel) as ctx:
            return self._select(ctx)

    def current(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """The inbox as the service shows it now."""
        with self._client._ctx(timeout, cancel) as ctx:
            self._mailbox = Mailbox.from_json(_field(self._do("GET", "/mailboxes/current", None, _READ, ctx), "mailbox"))
            return self._mailbox

    def extend(self, minutes: int, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """Asks for ``minutes`` (1 to 10) more; returns the inbox with the
        expiry granted, which never passes ``max_expires_at`` (the grant may
        be smaller than asked, or none)."""
        with self._client._ctx(timeout, cancel) as ctx:
            data = self._do("PATCH", "/mailboxes/current", {"extension_minutes": int(minutes)}, _WRITE, ctx)
            self._mailbox = Mailbox.from_json(_field(data, "mailbox"))
            return self._mailbox

    def delete(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> None:
        """Destroys the inbox and its messages. From then on every method
        raises :class:`InboxGoneError` without sending a request."""
        with self._client._ctx(timeout, cancel) as ctx:
            self._do("DELETE", "/mailboxes/current", None, _WRITE, ctx)
        self._mark_gone(InboxGoneError("inbox deleted", status=0))

    def list(
        self,
        limit: int = 20,
        offset: int = 0,
        *,
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> Page:
        """One page of the message list, newest first."""
        with self._client._ctx(timeout, cancel) as ctx:
            return self._list(limit, offset, ctx)

    def _list(self, limit: int, offset: int, ctx: Ctx) -> Page:
        q = urllib.parse.urlencode({"limit": int(limit), "offset": int(offset)})
        data = self._do("GET", f"/messages?{q}", None, _READ, ctx)
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise ProtocolError("answer without data.items")
        p = data.get("pagination") or {}
        return Page(
            items=[MessageSummary.from_json(i) for i in data["items"]],
            limit=int(p.get("limit", limit)),
            offset=int(p.get("offset", offset)),
            has_more=bool(p.get("has_more", False)),
        )

    def messages(
        self,
        page_size: int = 100,
        *,
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> Iterator[MessageSummary]:
        """Every message, newest first, a page of ``page_size`` (1 to 100) at
        a time, advancing the offset while ``has_more`` is set. ``timeout``
        bounds each page's call."""
        offset = 0
        while True:
            page = self.list(page_size, offset, timeout=timeout, cancel=cancel)
            yield from page.items
            if not page.has_more or not page.items:
                return
            offset += page_size

    def _all(self, ctx: Ctx) -> List[MessageSummary]:
        out: List[MessageSummary] = []
        offset = 0
        while True:
            page = self._list(100, offset, ctx)
            out.extend(page.items)
            if not page.has_more or not page.items:
                return out
            offset += 100

    def message(self, id: str, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Message:
        """One message with its bodies. It counts as seen by a later
        ``wait_for_message(since="unseen")``."""
        with self._client._ctx(timeout, cancel) as ctx:
            m = self._message(id, ctx)
        with self._lock:
            self._returned.add(m.id)
        return m

    def _message(self, id: str, ctx: Ctx) -> Message:
        data = self._do("GET", f"/messages/{urllib.parse.quote(str(id))}", None, _READ, ctx)
        return Message.from_json(_field(data, "message"))

    def delete_message(self, id: str, *, timeout: Optional[float] = None, cancel: Cancel = None) -> None:
        """Deletes one message."""
        with self._client._ctx(timeout, cancel) as ctx:
            self._do("DELETE", f"/messages/{urllib.parse.quote(str(id))}", None, _WRITE, ctx)

    # The event stream.

    def _open_stream(self, ctx: Ctx) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """GET /events. Raises InboxGoneError (401), CancelledError, or a
        transient MayflyError when the stream could not be opened."""
        c = self._client
        self._check_gone()
        try:
            conn, resp = c._send(self._jar, "GET", "/events", None, ctx, "text/event-stream", c.stream_open_timeout)
        except (_NotSent, _Sent) as e:
            ctx.check_cancel()
            raise TransportError(f"GET /events: {e.__cause__}") from e.__cause__
        ok = False
        try:
            if resp.status != 200:
                err = _api_error(resp, resp.read(_MAX_BODY))
                if err.status == 401:
                    raise self._mark_gone(err)
                raise err
            ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "text/event-stream":
                raise ProtocolError(f"GET /events: content type {ctype!r}, not an event stream")
            conn._mayfly_sock.settimeout(c.stream_idle_timeout)  # type: ignore[attr-defined]
            ok = True
            return conn, resp
        except (OSError, http.client.HTTPException) as e:
            ctx.check_cancel()
            raise TransportError(f"GET /events: {e}") from e
        finally:
            if not ok:
                ctx.detach(conn)
                resp.close()
                conn.close()

    def _follow(self, ctx: Ctx, existing: bool, fallback: bool) -> Iterator[Tuple[MessageSummary, bool]]:
        """New messages across reconnects, as (summary, missed), each once.

        It lists the messages after every (re)connect (missed=True for what
        the list finds) and follows the stream. With ``existing`` the
        messages present at the start are yielded too; without, only marked
        seen. With ``fallback``, when the stream fails twice in a row it
        polls the list every poll interval until the deadline. When the
        service ends the stream because a newer stream on the same inbox
        took over (the comment ``: replaced ...``), it warns and polls for
        the replaced pause (60 s) before opening the stream again, so two
        programs following one inbox do not cut each other off in turn.
        Returns at the deadline; raises InboxGoneError and CancelledError."""
        c = self._client
        seen: Set[str] = set()
        last_list = [float("-inf")]  # when a list was last answered (or failed)
        if not existing:
            # What is there before the stream opens is not new: mark it
            # seen. What arrives before the stream opens is found by the
            # list that follows the opening.
            items = self._retrying(ctx, lambda: self._all(ctx))
            if items is None:
                return
            seen.update(m.id for m in items)
            last_list[0] = time.monotonic()
        failures = 0
        attempt = 0

        def catch_up() -> Iterator[Tuple[MessageSummary, bool]]:
            items = self._all(ctx)
            last_list[0] = time.monotonic()  # after the answer
            for m in reversed(items):  # oldest first
                if m.id not in seen:
                    seen.add(m.id)
                    yield m, True

        def poll(until: Optional[float]) -> Generator[Tuple[MessageSummary, bool], None, bool]:
            """Lists every poll interval (the first an interval after the
            last list) until ``until`` (monotonic; None: no end). Returns
            False when the deadline passed first."""
            while True:
                nxt = last_list[0] + c.poll_interval
                if until is not None and nxt >= until:
                    return ctx.sleep(max(0.0, until - time.monotonic()), clamp=True)
                if not ctx.sleep(max(0.0, nxt - time.monotonic()), clamp=True):
                    return False
                try:
                    yield from catch_up()
                except MayflyError as e:
                    if not _transient(e):
                        raise
                    ctx.check_cancel()
                    last_list[0] = time.monotonic()
                    log.info("mayfly: listing the messages failed; trying again in %.0fs: %s", c.poll_interval, e)

        while True:
            ctx.check_cancel()
            if ctx.expired():
                return
            opened = time.monotonic()
            heard = False
            replaced = False
            try:
                conn, resp = self._open_stream(ctx)
            except MayflyError as e:
                if not _transient(e):
                    raise
                log.debug("mayfly: the event stream did not open: %s", e)
            else:
                try:
                    yield from catch_up()
                    parser = SSEParser()
                    while True:
                        line = resp.readline(_MAX_LINE)
                        if not line:
                            break
                        heard = True
                        if line.startswith(b":") and line[1:].lstrip(b" ").startswith(b"replaced"):
                            # The service's ": replaced by a newer stream on
                            # this inbox": another program took it over.
                            replaced = True
                            break
                        ev = parser.feed(line.decode("utf-8", "replace"))
                        if ev is None or ev.event != EVENT_MESSAGE_RECEIVED:
                            continue
                        try:
                            m = MessageSummary.from_json(json.loads(ev.data))
                        except (ValueError, KeyError, TypeError, AttributeError):
                            yield from catch_up()  # the payload is not the API's to define: list
                            continue
                        if m.id not in seen:
                            seen.add(m.id)
                            yield m, False
                except (OSError, http.client.HTTPException) as e:
                    log.debug("mayfly: the event stream broke: %s", e)
                except MayflyError as e:
                    if not _transient(e):
                        raise
                finally:
                    ctx.detach(conn)
                    resp.close()
                    conn.close()
            ctx.check_cancel()
            if ctx.expired():
                return
            if replaced:
                log.warning(
                    "mayfly: the service ended the event stream: another client opened one on this inbox "
                    "(one stream per inbox); polling the message list every %.0fs for %.0fs, then opening it again",
                    c.poll_interval, c._replaced_pause,
                )
                if not (yield from poll(time.monotonic() + c._replaced_pause)):
                    return
                failures, attempt = 0, 0
                continue
            if heard:
                failures = 0
            else:
                failures += 1
                if fallback and failures >= 2:
                    # As the Go client: from here on the wait polls until
                    # its deadline, and does not go back to the stream.
                    log.info("mayfly: event stream unavailable; polling the message list every %.0fs", c.poll_interval)
                    yield from poll(None)
                    return
            if time.monotonic() - opened > 60:
                attempt = 0  # it ran a while: start the backoff over
            attempt += 1
            if not ctx.sleep(_backoff(attempt), clamp=True):
                return

    def events(
        self, *, timeout: Optional[float] = None, cancel: Cancel = None
    ) -> Iterator[Event]:
        """The inbox's new messages as they arrive, from GET /events, across
        reconnects (each followed by a list that yields what the stream
        missed). Messages present when it starts are not yielded. It ends
        quietly after ``timeout`` seconds (``None``: never), raises
        :class:`InboxGoneError` when the inbox is deleted or expires,
        :class:`CancelledError` on ``cancel``, and :class:`StreamBusyError`
        when another stream of this inbox runs. Closing the generator (or
        leaving the ``for`` loop) closes the stream."""
        self._check_gone()
        if not self._stream.acquire(blocking=False):
            raise StreamBusyError("an event stream of this inbox is already open")
        try:
            with Ctx(timeout, cancel, watch_deadline=True) as ctx:
                for m, missed in self._follow(ctx, existing=False, fallback=False):
                    yield Event(type=EVENT_MESSAGE_RECEIVED, message=m, missed=missed)
        finally:
            self._stream.release()

    def wait_for_message(
        self,
        *,
        subject: Regex = None,
        from_: Regex = None,
        text: Regex = None,
        match: Optional[Callable[[Message], bool]] = None,
        since: Since = "unseen",
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> Message:
        """The first message that matches and is new in the sense of
        ``since``, with its bodies (status ready or failed).

        A match is every condition given: ``subject``, ``from_`` and
        ``text`` (on ``text_body``) are regular expressions (``re.search``),
        ``match`` a predicate on the full :class:`Message`. ``since`` is:

        - ``"unseen"`` (default): a message this Inbox object has not
          already returned from a wait or from :meth:`message`;
        - ``"now"``: a message not in the inbox when the wait started,
          which is when its first list of the inbox is answered (a
          request-rate 429 or an outage delays it): trigger the mail after
          the wait has started, or take a message id or a time before
          triggering it;
        - a message id (or a :class:`MessageSummary`): received after that
          message (list order);
        - an aware :class:`~datetime.datetime`: ``received_at`` strictly
          after it (a naive one is taken as UTC).

        There is no match on the recipient: messages carry none, and every
        message of an inbox was sent to its one address (use one inbox per
        address under test).

        Among several, the oldest is returned. The wait follows the event
        stream (polling the list every 5 s when the stream fails twice in a
        row, until the deadline; for 60 s, with a warning on the ``mayfly``
        logger, when the service ends the stream because another program
        opened one on the same inbox) and outlives restarts, refused connections, 503s and 429s until
        ``timeout`` seconds (default: the client's ``wait_timeout``; ``None``
        there means no deadline), then raises :class:`WaitTimeoutError`.
        Setting ``cancel`` ends it at once with :class:`CancelledError`."""
        self._check_gone()
        rx_subject, rx_from, rx_text = _compile(subject), _compile(from_), _compile(text)
        if timeout is None:
            timeout = self._client.wait_timeout
        if not self._stream.acquire(blocking=False):
            raise StreamBusyError("an event stream of this inbox is already open")
        try:
            with Ctx(timeout, cancel, watch_deadline=True) as ctx:
                found = self._wait(ctx, rx_subject, rx_from, rx_text, match, since)
                if found is None:
                    raise WaitTimeoutError(f"no matching message within {timeout}s")
                return found
        finally:
            self._stream.release()

    def _wait(
        self,
        ctx: Ctx,
        rx_subject: Optional[Pattern[str]],
        rx_from: Optional[Pattern[str]],
        rx_text: Optional[Pattern[str]],
        match: Optional[Callable[[Message], bool]],
        since: Since,
    ) -> Optional[Message]:
        if isinstance(since, MessageSummary):
            since = since.id
        old: Optional[Set[str]] = None  # the ids that are not new ("now", an id)
        after: Optional[datetime] = None
        if isinstance(since, datetime):
            after = since if since.tzinfo is not None else since.replace(tzinfo=timezone.utc)
        elif since != "unseen":
            items = self._retrying(ctx, lambda: self._all(ctx))
            if items is None:
                return None
            if since == "now":
                old = {m.id for m in items}
            else:
                ids = [m.id for m in items]  # newest first
                if since not in ids:
                    raise ValueError(f"mayfly: since={since!r}: no such message in this inbox")
                old = set(ids[ids.index(since):])

        def new(m: MessageSummary) -> bool:
            if old is not None:
                return m.id not in old
            if after is not None:
                return m.received_at is not None and m.received_at > after
            return m.id not in self._returned

        for summary, _ in self._follow(ctx, existing=True, fallback=True):
            if not new(summary):
                continue
            if rx_subject is not None and not rx_subject.search(summary.subject):
                continue
            if rx_from is not None and not rx_from.search(summary.from_):
                continue
            msg = self._full(ctx, summary.id)
            if msg is None:
                continue
            if rx_text is not None and not rx_text.search(msg.text_body):
                continue
            if match is not None and not match(msg):
                continue
            with self._lock:
                self._returned.add(msg.id)
            return msg
        return None

    def _full(self, ctx: Ctx, id: str) -> Optional[Message]:
        """The message with its bodies once it is no longer pending; None if
        it went away (deleted, evicted)."""
        while True:
            try:
                msg = self._retrying(ctx, lambda: self._message(id, ctx))
            except MayflyError as e:
                if e.status == 404:
                    return None
                raise
            if msg is None:
                return None
            if msg.status != STATUS_PENDING:
                return msg
            if not ctx.sleep(self._client.poll_interval, clamp=True):
                return None

    def _retrying(self, ctx: Ctx, fn: Callable[[], Any]) -> Any:
        """fn, again after transient failures, until the deadline (None)."""
        attempt = 0
        while True:
            try:
                return fn()
            except MayflyError as e:
                if not _transient(e):
                    raise
                ctx.check_cancel()
            attempt += 1
            if not ctx.sleep(_backoff(attempt), clamp=True):
                return None

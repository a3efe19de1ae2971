"""The client: :class:`Client` talks to one service, each :class:`Inbox` holds
the cookie jar of one inbox. Standard library only."""

from __future__ import annotations

import contextlib
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
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Pattern, Set, Tuple, Union

from . import _recipient, _retry
from ._ctx import Cancel, Ctx, Reach
from .errors import (
    CREATION_LIMIT_CODES,
    CancelledError,
    explain_creation_limit,
    CreationLimitError,
    InboxGoneError,
    MayflyError,
    MessageNotFoundError,
    ProtocolError,
    RateLimitedError,
    StreamBusyError,
    TransportError,
    UnexpectedMessageError,
    UnreachableError,
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
    parse_time,
)
from .sse import SSEParser

log = logging.getLogger("mayfly")

#: The API's floor for polling the message list, in seconds.
MIN_POLL_INTERVAL = 5.0

#: The default deadline of a wait (and of ``events()``), in seconds, when the
#: caller gives none: the same in the Go, TypeScript and Python clients.
DEFAULT_WAIT_TIMEOUT = 20.0

#: After how many seconds of transport failures in a row (every attempt
#: refused, reset or timed out) a wait gives up with UnreachableError.
DEFAULT_UNREACHABLE_AFTER = 10.0

#: The version of the format of Inbox.state() (clients/SCENARIOS.md).
STATE_VERSION = 1

#: How long a stream that the service ended because another stream took the
#: inbox over (the comment ``: replaced ...``) polls the list before it opens
#: the stream again, in seconds (clients/SCENARIOS.md).
REPLACED_PAUSE = 60.0

_MAX_BODY = 64 << 20
_MAX_LINE = 1 << 20

# What a call may retry (SCENARIOS.md, "Retries").
_CREATE = _retry.CREATE
_WRITE = _retry.WRITE
_READ = _retry.READ

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
    return _retry.parse_retry_after(value)


def _backoff(attempt: int) -> float:
    """Full jitter over an exponentially growing ceiling: the wait before
    retry number ``attempt`` (1, 2, ...)."""
    return _retry.backoff(attempt)


def _compile(rx: Regex) -> Optional[Pattern[str]]:
    if rx is None:
        return None
    return re.compile(rx) if isinstance(rx, str) else rx


def _transient(e: BaseException) -> bool:
    """Errors a wait or a stream outlives (until its deadline)."""
    if isinstance(e, (InboxGoneError, CancelledError, StreamBusyError, CreationLimitError, UnreachableError)):
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
        inbox = Inbox(self, new_jar())
        ctx = self._ctx(timeout, cancel)
        with ctx:
            while True:
                try:
                    data = self._call(inbox._jar, "POST", "/mailboxes", body, _CREATE, ctx)
                    break
                except CreationLimitError as e:
                    if not wait_for_capacity:
                        raise
                    wait = 1.0 if e.code == "ACTIVE_INBOX_LIMIT" or e.retry_after is None else e.retry_after
                    wait += random.uniform(0, 0.25)
                    log.debug("mayfly: %s; waiting %.1fs for capacity", e.code, wait)
                    if not ctx.sleep(wait):
                        raise
            mb = Mailbox.from_json(_field(data, "mailbox"))
            inbox._mailbox = mb
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
        if isinstance(state, (str, bytes)):
            state = json.loads(state)
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"mayfly: not an inbox state of version {STATE_VERSION}")
        base = str(state.get("base", "")).rstrip("/")
        if base != self.base_url:
            raise ValueError(f"mayfly: the state is of {base!r}, not of this client's {self.base_url!r}")
        jar = new_jar()
        host = http.cookiejar.eff_request_host(urllib.request.Request(self.base_url))[1]
        for c in state.get("cookies") or []:
            exp = parse_time(c.get("expires"))
            jar.set_cookie(http.cookiejar.Cookie(
                version=0, name=str(c["name"]), value=str(c["value"]), port=None, port_specified=False,
                domain=host, domain_specified=False, domain_initial_dot=False,
                path=str(c.get("path") or "/"), path_specified=True, secure=bool(c.get("secure", False)),
                expires=None if exp is None else int(exp.timestamp()), discard=exp is None,
                comment=None, comment_url=None, rest={"HttpOnly": None}, rfc2109=False,
            ))
        inbox = Inbox(self, jar)
        inbox._mailbox = Mailbox.from_json(_field(state, "mailbox"))
        inbox._returned = dict.fromkeys(str(i) for i in state.get("seen") or [])
        if state.get("gone"):
            inbox._gone = InboxGoneError("inbox gone (restored from a state marked gone)", url=self.base_url)
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
                self._unreachable(ctx, method, path, e)
                raise _NotSent(e) from e
            # http.client forgets the socket of a "Connection: close" answer
            # (the response keeps it): the watchdog and the stream need it.
            conn._mayfly_sock = conn.sock  # type: ignore[attr-defined]
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self._unreachable(ctx, method, path, e)
                raise _Sent(e) from e
        except BaseException:
            ctx.detach(conn)
            conn.close()
            raise
        if ctx.reach is not None:
            ctx.reach.ok()
        jar.extract_cookies(_Response(resp), req)  # type: ignore[arg-type]
        return conn, resp

    def _unreachable(self, ctx: Ctx, method: str, path: str, e: BaseException) -> None:
        """Counts a transport failure of a wait (no HTTP answer); raises
        UnreachableError once they have lasted unreachable_after in a row.
        A failure the caller's cancellation or deadline caused is none."""
        r = ctx.reach
        if r is None or ctx.cancelled() or ctx.expired():
            return
        r.fail(e)
        down = r.down_for()
        if self.unreachable_after is not None and down is not None and down >= self.unreachable_after:
            err = UnreachableError(
                f"unreachable for {down:.1f}s (every attempt failed; last error: {e})",
                method=method, url=self._url(path),
            )
            err.unreachable_for = down
            raise err from e

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
            wait: Optional[float] = None
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
                err = TransportError(str(e.__cause__), method=method, url=self._url(path))
                err.__cause__ = e.__cause__
                # Nothing was sent: any call may try again, but a
                # certificate that does not verify will not start to.
                if not isinstance(e.__cause__, ssl.SSLCertVerificationError):
                    wait = _retry.decide(kind, attempt, transport=_retry.REFUSED, remaining=ctx.remaining(),
                                         policy=self._policy)
            except _Sent as e:
                ctx.check_cancel()
                err = TransportError(str(e.__cause__ or "no answer"), method=method, url=self._url(path))
                err.__cause__ = e.__cause__
                if not ctx.expired():
                    wait = _retry.decide(kind, attempt, transport=_retry.RESET, remaining=ctx.remaining(),
                                         policy=self._policy)
            else:
                if 200 <= resp.status < 300:
                    if resp.status == 204 or not raw:
                        return None
                    try:
                        env = json.loads(raw)
                        return env["data"]
                    except (ValueError, KeyError, TypeError) as e:
                        raise ProtocolError(f"answer {resp.status} without a data envelope", status=resp.status,
                                            method=method, url=self._url(path)) from e
                err = _api_error(resp, raw, method, self._url(path))
                if err.code in CREATION_LIMIT_CODES:
                    raise err._copy_into(CreationLimitError, explain_creation_limit(err))
                if err.code == "MESSAGE_NOT_FOUND":
                    raise err._copy_into(MessageNotFoundError)
                if resp.status == 429:
                    err = err._copy_into(RateLimitedError)
                wait = _retry.decide(kind, attempt, status=err.status, code=err.code, retry_after=err.retry_after,
                                     remaining=ctx.remaining(), policy=self._policy)
            if wait is None:
                raise err
            info = RetryInfo(method, _route(path), attempt, wait, err.status, err.code, str(err))
            log.debug("mayfly: retrying %s %s after %s (attempt %d, wait %.2fs)", method, info.path,
                      err.code or err.status or "a connection failure", attempt, wait)
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


def _api_error(resp: http.client.HTTPResponse, raw: bytes, method: str, url: str) -> MayflyError:
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
    if not code and not message:
        # No error envelope: not the API (the admin port, a proxy, a base
        # URL without /v1 on another server).
        message = (f"{resp.reason or 'HTTP ' + str(resp.status)}: not an answer of the Mayfly API "
                   "(is the base URL the API's, ending in /v1?)")
    return MayflyError(
        message,
        status=resp.status,
        code=code,
        request_id=rid,
        details=details,
        retry_after=_retry_after(resp.getheader("Retry-After")),
        method=method,
        url=url,
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
    :class:`InboxGoneError` (:meth:`delete` excepted: it returns False).
    Used as a context manager, the inbox is deleted at the end of the
    block."""

    def __init__(self, client: Client, jar: http.cookiejar.CookieJar) -> None:
        self._client = client
        self._jar = jar
        self._mailbox: Optional[Mailbox] = None
        self._lock = threading.Lock()
        self._stream = threading.Lock()
        self._gone: Optional[InboxGoneError] = None
        # The ids a wait or message() returned, in that order (a dict: an
        # ordered set); state() saves them as "seen".
        self._returned: Dict[str, None] = {}

    def __repr__(self) -> str:
        return f"<mayfly.Inbox {self.address}>"

    def __enter__(self) -> "Inbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

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

    def address_for(self, tag: str) -> str:
        """``local+tag@domain`` of this inbox's ``local@domain``: mail to it
        lands in this inbox with it as ``to``. No request; ValueError for a
        tag outside 1 to 64 of ``A-Z a-z 0-9 . _ -`` (or ``local+tag`` over
        64 characters)."""
        return _recipient.address_for(self.address, tag)

    def recipient(self, tag: str) -> "_recipient.Recipient":
        """A :class:`Recipient`: the tagged address :meth:`address_for`
        gives, with this inbox's waits scoped to it. No request."""
        return _recipient.Recipient(self, tag)

    @property
    def gone(self) -> bool:
        """Whether the inbox is known to be gone (deleted, or the service no
        longer accepts it)."""
        return self._gone is not None

    def state(self) -> Dict[str, Any]:
        """What restores this inbox in another process (or in the Go or
        TypeScript client): a dict in the shared JSON format of
        clients/SCENARIOS.md — ``version``, ``base``, ``mailbox``, the jar's
        ``cookies`` (name, value, path, ``expires`` in RFC 3339 unless a
        session cookie, ``secure`` when set), the ``seen`` ids (oldest
        first) and ``gone`` when gone. ``json.dumps`` it; restore it with
        :meth:`Client.restore`. It holds the inbox's cookies: keep it as
        secret as the inbox (never log it)."""
        cookies: List[Dict[str, Any]] = []
        for c in self._jar:
            d: Dict[str, Any] = {"name": c.name, "value": c.value, "path": c.path}
            if c.expires is not None:
                d["expires"] = _rfc3339(datetime.fromtimestamp(c.expires, timezone.utc))
            if c.secure:
                d["secure"] = True
            cookies.append(d)
        mb = self.mailbox
        mailbox: Dict[str, Any] = {"id": mb.id, "address": mb.address, "kind": mb.kind}
        for name in ("expires_at", "max_expires_at"):
            t = getattr(mb, name)
            mailbox[name] = None if t is None else _rfc3339(t)  # null when the service gave none, as Go and TS
        with self._lock:
            seen = list(self._returned)
        st: Dict[str, Any] = {"version": STATE_VERSION, "base": self._client.base_url, "mailbox": mailbox,
                              "cookies": cookies, "seen": seen}
        if self.gone:
            st["gone"] = True
        return st

    def _saw(self, id: str) -> None:
        with self._lock:
            self._returned[id] = None

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
            g = e._copy_into(InboxGoneError, f"inbox expired or deleted: {e.message}{hint}")
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

    def delete(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> bool:
        """Destroys the inbox and its messages; returns whether it existed.
        Idempotent: an inbox already gone (deleted before, by this object or
        another holder of its cookies, or expired) is success, and returns
        False (after this object's own delete without a request). From then
        on every other method raises :class:`InboxGoneError` without
        sending a request."""
        if self._gone is not None:
            return False
        try:
            with self._client._ctx(timeout, cancel) as ctx:
                self._do("DELETE", "/mailboxes/current", None, _WRITE, ctx)
        except InboxGoneError:
            return False
        except MayflyError as e:
            if e.status != 404 or e.code != "MAILBOX_NOT_FOUND":
                raise
            self._mark_gone(e)
            return False
        self._mark_gone(InboxGoneError("inbox deleted", url=self._client.base_url))
        return True

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
            items=[MessageSummary.from_json(i, self.address) for i in data["items"]],
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
        self._saw(m.id)
        return m

    def _message(self, id: str, ctx: Ctx) -> Message:
        data = self._do("GET", f"/messages/{urllib.parse.quote(str(id))}", None, _READ, ctx)
        return Message.from_json(_field(data, "message"), self.address)

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
        url = c._url("/events")
        try:
            conn, resp = c._send(self._jar, "GET", "/events", None, ctx, "text/event-stream", c.stream_open_timeout)
        except (_NotSent, _Sent) as e:
            ctx.check_cancel()
            raise TransportError(str(e.__cause__), method="GET", url=url) from e.__cause__
        ok = False
        try:
            if resp.status != 200:
                err = _api_error(resp, resp.read(_MAX_BODY), "GET", url)
                if err.status == 401:
                    raise self._mark_gone(err)
                raise err
            ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "text/event-stream":
                raise ProtocolError(f"content type {ctype!r}, not an event stream", method="GET", url=url)
            conn._mayfly_sock.settimeout(c.stream_idle_timeout)  # type: ignore[attr-defined]
            ok = True
            return conn, resp
        except (OSError, http.client.HTTPException) as e:
            ctx.check_cancel()
            raise TransportError(str(e), method="GET", url=url) from e
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
                            m = MessageSummary.from_json(json.loads(ev.data), self.address)
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

    @contextlib.contextmanager
    def _one_stream(self, what: str) -> Iterator[None]:
        """Holds the inbox's one stream (its waits and events()) for a block;
        StreamBusyError when another holds it."""
        self._check_gone()
        if not self._stream.acquire(blocking=False):
            raise StreamBusyError("an event stream of this inbox is already open", method=what,
                                  url=self._client.base_url)
        try:
            yield
        finally:
            self._stream.release()

    def _wait_ctx(self, timeout: Optional[float], cancel: Cancel) -> Tuple[Ctx, Optional[float]]:
        """The context of a wait: ``timeout`` (None: the client's
        wait_timeout), the watchdog on its deadline, and the count of its
        transport failures in a row (UnreachableError)."""
        if timeout is None:
            timeout = self._client.wait_timeout
        ctx = Ctx(timeout, cancel, watch_deadline=True)
        ctx.reach = Reach()
        return ctx, timeout

    def _timeout_error(self, what: str, timeout: Optional[float], ctx: Ctx, m: Optional["_Matcher"]) -> WaitTimeoutError:
        """The wait-timeout error, saying why: the server unreachable (the
        last error, for how long), or the messages that arrived and matched
        none, or that none arrived."""
        head = f"no matching message within {timeout:g}s" if timeout is not None else "no matching message"
        if m is not None and m.want > 1:
            head = f"{len(m.found)} of {m.want} matching messages within {timeout:g}s"
        r = ctx.reach
        down = None if r is None else r.down_for()
        if r is not None and down is not None:
            why = f"the server has been unreachable for {down:.1f}s (last error: {r.last})"
        elif m is not None and m.others:
            n = m.others
            first = json.dumps(m.first_other, ensure_ascii=False)
            why = f"{n} message{'s' if n != 1 else ''} arrived, none matched (first: {first})"
        elif m is not None and not m.found:
            why = "no message arrived"
        else:
            why = "the deadline passed"
        return WaitTimeoutError(f"{head}: {why}", method=what, url=self._client.base_url)

    def events(
        self, *, to: Optional[str] = None, timeout: Optional[float] = None, cancel: Cancel = None
    ) -> Iterator[Event]:
        """The inbox's new messages as they arrive, from GET /events, across
        reconnects (each followed by a list that yields what the stream
        missed). Messages present when it starts are not yielded.

        At ``timeout`` seconds (default: the client's ``wait_timeout``, 20 s)
        it ends with :class:`WaitTimeoutError` (catch it to end quietly);
        it raises :class:`UnreachableError` when every attempt has failed for
        the client's ``unreachable_after``, :class:`InboxGoneError` when the
        inbox is deleted or expires, :class:`CancelledError` on ``cancel``,
        and :class:`StreamBusyError` when another stream of this inbox runs.
        Closing the generator (or leaving the ``for`` loop) closes the
        stream. With ``to`` (an address, any case), only the messages sent
        to it."""
        want = None if to is None else to.strip().lower()
        with self._one_stream("events"):
            ctx, timeout = self._wait_ctx(timeout, cancel)
            with ctx:
                for m, missed in self._follow(ctx, existing=False, fallback=False):
                    if want is not None and m.to != want:
                        continue
                    yield Event(type=EVENT_MESSAGE_RECEIVED, message=m, missed=missed)
                ctx.check_cancel()
                raise self._timeout_error("events", timeout, ctx, None)

    def wait_for_message(
        self,
        *,
        subject: Regex = None,
        from_: Regex = None,
        text: Regex = None,
        match: Optional[Callable[[Message], bool]] = None,
        to: Optional[str] = None,
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
          message (list order); an id the inbox does not hold raises
          :class:`MessageNotFoundError`;
        - an aware :class:`~datetime.datetime`: ``received_at`` strictly
          after it (a naive one is taken as UTC).

        ``to`` is an address (compared without regard to case): only a
        message sent to it (its ``to``, the envelope recipient) matches, as
        :meth:`recipient` scopes a wait to a tagged address.

        Among several, the oldest is returned. The wait follows the event
        stream (polling the list every 5 s when the stream fails twice in a
        row, until the deadline; for 60 s, with a warning on the ``mayfly``
        logger, when the service ends the stream because another program
        opened one on the same inbox) and outlives restarts, refused
        connections, 503s and 429s until ``timeout`` seconds (default: the
        client's ``wait_timeout``, 20 s; ``None`` there means no deadline),
        then raises :class:`WaitTimeoutError`, whose message says why. When
        every attempt has failed at the transport level for the client's
        ``unreachable_after`` (10 s), it raises :class:`UnreachableError`
        at once. Setting ``cancel`` ends it with :class:`CancelledError`."""
        return self._waiting("wait_for_message", 1, subject, from_, text, match, to, since, timeout, cancel)[0]

    def wait_for_messages(
        self,
        count: int,
        *,
        subject: Regex = None,
        from_: Regex = None,
        text: Regex = None,
        match: Optional[Callable[[Message], bool]] = None,
        to: Optional[str] = None,
        since: Since = "unseen",
        timeout: Optional[float] = None,
        cancel: Cancel = None,
    ) -> List[Message]:
        """``count`` messages that match and are new in the sense of
        ``since`` (as :meth:`wait_for_message`), oldest first, once all have
        arrived; they count as seen. At the deadline it raises
        :class:`WaitTimeoutError` saying how many it had (and marks none
        seen)."""
        if count < 1:
            raise ValueError("mayfly: wait_for_messages wants a count of 1 or more")
        return self._waiting("wait_for_messages", count, subject, from_, text, match, to, since, timeout, cancel)

    def expect_no_message(
        self,
        within: float,
        *,
        subject: Regex = None,
        from_: Regex = None,
        text: Regex = None,
        match: Optional[Callable[[Message], bool]] = None,
        to: Optional[str] = None,
        since: Since = "unseen",
        cancel: Cancel = None,
    ) -> None:
        """Succeeds when no message that matches (as :meth:`wait_for_message`)
        and is new in the sense of ``since`` arrives within ``within``
        seconds; otherwise raises :class:`UnexpectedMessageError` carrying
        it (``received``) as soon as it arrives. At the end of the window
        it lists the inbox once more, so a window the server could not be
        reached in is an error (the transport's), never a success."""
        m = _Matcher(subject, from_, text, match, 1, to)
        with self._one_stream("expect_no_message"):
            ctx, _ = self._wait_ctx(within, cancel)
            with ctx:
                new = self._since(ctx, since, "expect_no_message")
                if new is not None:
                    self._collect(ctx, new, m)
            if new is not None and not m.found:
                # The window is over: one more list, as a plain call, to
                # see what arrived since the stream last spoke.
                with self._client._ctx(None, cancel) as last:
                    for s in reversed(self._all(last)):
                        if m.found or not new(s) or not m.summary_ok(s):
                            continue
                        full = self._full(last, s.id)
                        if full is not None and m.full_ok(full):
                            m.found.append(full)
        if new is None:
            ctx.check_cancel()
            raise self._timeout_error("expect_no_message", within, ctx, None)
        if m.found:
            got = m.found[0]
            self._saw(got.id)
            e = UnexpectedMessageError(
                f"a matching message arrived within {within:g}s: {got.subject!r} from {got.from_!r}",
                code="UNEXPECTED_MESSAGE", method="expect_no_message", url=self._client.base_url,
            )
            e.received = got
            raise e

    def _waiting(
        self,
        what: str,
        count: int,
        subject: Regex,
        from_: Regex,
        text: Regex,
        match: Optional[Callable[[Message], bool]],
        to: Optional[str],
        since: Since,
        timeout: Optional[float],
        cancel: Cancel,
    ) -> List[Message]:
        m = _Matcher(subject, from_, text, match, count, to)
        with self._one_stream(what):
            ctx, timeout = self._wait_ctx(timeout, cancel)
            with ctx:
                new = self._since(ctx, since, what)
                if new is not None:
                    self._collect(ctx, new, m)
                if len(m.found) < count:
                    ctx.check_cancel()
                    raise self._timeout_error(what, timeout, ctx, m)
        for msg in m.found:
            self._saw(msg.id)
        return m.found

    def _since(self, ctx: Ctx, since: Since, what: str) -> Optional[Callable[[MessageSummary], bool]]:
        """Whether a message is new in the sense of ``since``; None when the
        deadline passed before the inbox could be listed ("now", an id)."""
        if isinstance(since, MessageSummary):
            since = since.id
        if isinstance(since, datetime):
            after = since if since.tzinfo is not None else since.replace(tzinfo=timezone.utc)
            return lambda s: s.received_at is not None and s.received_at > after
        if since == "unseen":
            return lambda s: s.id not in self._returned
        items = self._retrying(ctx, lambda: self._all(ctx))
        if items is None:
            return None
        ids = [s.id for s in items]  # newest first
        if since == "now":
            old = set(ids)
        elif since in ids:
            old = set(ids[ids.index(since):])
        else:
            raise MessageNotFoundError(
                f"since={since!r}: no such message in this inbox",
                status=404, code="MESSAGE_NOT_FOUND", method=what, url=self._client.base_url,
            )
        return lambda s: s.id not in old

    def _collect(self, ctx: Ctx, new: Callable[[MessageSummary], bool], m: "_Matcher") -> None:
        """Follows the inbox (what is there first, oldest first) into
        m.found until it holds m.want messages or the deadline passes."""
        for summary, _ in self._follow(ctx, existing=True, fallback=True):
            if not new(summary):
                continue
            if not m.summary_ok(summary):
                m.other(summary.subject)
                continue
            msg = self._full(ctx, summary.id)
            if msg is None:
                continue
            if not m.full_ok(msg):
                m.other(msg.subject)
                continue
            m.found.append(msg)
            if len(m.found) >= m.want:
                return

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


class _Matcher:
    """The conditions of a wait, and what it has met: the messages found,
    and the new ones that matched none (for the wait-timeout error)."""

    def __init__(self, subject: Regex, from_: Regex, text: Regex,
                 match: Optional[Callable[[Message], bool]], want: int, to: Optional[str] = None) -> None:
        self.subject, self.from_, self.text = _compile(subject), _compile(from_), _compile(text)
        self.to = None if to is None else to.strip().lower()
        self.match = match
        self.want = want
        self.found: List[Message] = []
        self.others = 0
        self.first_other = ""

    def summary_ok(self, s: MessageSummary) -> bool:
        if self.to is not None and s.to != self.to:
            return False
        if self.subject is not None and not self.subject.search(s.subject):
            return False
        return self.from_ is None or bool(self.from_.search(s.from_))

    def full_ok(self, msg: Message) -> bool:
        if self.text is not None and not self.text.search(msg.text_body):
            return False
        return self.match is None or bool(self.match(msg))

    def other(self, subject: str) -> None:
        if not self.others:
            self.first_other = subject
        self.others += 1


def _rfc3339(t: datetime) -> str:
    """t in UTC as RFC 3339 with a Z (the fraction without trailing zeros)."""
    t = t.astimezone(timezone.utc)
    frac = f"{t.microsecond:06d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"

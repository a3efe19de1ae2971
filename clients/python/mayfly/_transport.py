"""Transport: one request with an inbox's cookies and its errors, and one
API call with the retries its kind allows (the rules: _retry.py)."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import logging
import ssl
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from . import _retry
from ._ctx import Ctx
from .errors import (
    CREATION_LIMIT_CODES,
    CreationLimitError,
    MayflyError,
    MessageNotFoundError,
    ProtocolError,
    RateLimitedError,
    TransportError,
    UnreachableError,
    explain_creation_limit,
)

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("mayfly")

MAX_BODY = 64 << 20


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


class NotSent(Exception):
    """The connection could not be made: nothing was sent."""


class Sent(Exception):
    """The request was (maybe) sent, and no answer was read."""


class _Response:
    """What http.cookiejar needs of a response."""

    def __init__(self, resp: http.client.HTTPResponse) -> None:
        self._resp = resp

    def info(self) -> Any:
        return self._resp.msg


def send(
    c: "Client",
    jar: http.cookiejar.CookieJar,
    method: str,
    path: str,
    body: Optional[bytes],
    ctx: Ctx,
    accept: str,
    timeout: float,
) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """One request with the jar's cookies. Raises NotSent or Sent."""
    req = urllib.request.Request(c._url(path), method=method)
    jar.add_cookie_header(req)
    headers = {"Accept": accept, "User-Agent": c.user_agent}
    cookie = req.get_header("Cookie")
    if cookie:
        headers["Cookie"] = cookie
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn = c._connection(ctx.socket_timeout(timeout))
    ctx.attach(conn)
    try:
        try:
            conn.connect()
        except OSError as e:
            unreachable(c, ctx, method, path, e)
            raise NotSent(e) from e
        # http.client forgets the socket of a "Connection: close" answer
        # (the response keeps it): the watchdog and the stream need it.
        conn._mayfly_sock = conn.sock  # type: ignore[attr-defined]
        try:
            conn.request(method, c._prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            unreachable(c, ctx, method, path, e)
            raise Sent(e) from e
    except BaseException:
        ctx.detach(conn)
        conn.close()
        raise
    if ctx.reach is not None:
        ctx.reach.ok()
    jar.extract_cookies(_Response(resp), req)  # type: ignore[arg-type]
    return conn, resp


def unreachable(c: "Client", ctx: Ctx, method: str, path: str, e: BaseException) -> None:
    """Counts a transport failure of a wait (no HTTP answer); raises
    UnreachableError once they have lasted unreachable_after in a row.
    A failure the caller's cancellation or deadline caused is none."""
    r = ctx.reach
    if r is None or ctx.cancelled() or ctx.expired():
        return
    r.fail(e)
    down = r.down_for()
    if c.unreachable_after is not None and down is not None and down >= c.unreachable_after:
        err = UnreachableError(
            f"unreachable for {down:.1f}s (every attempt failed; last error: {e})",
            method=method, url=c._url(path),
        )
        err.unreachable_for = down
        raise err from e


def call(
    c: "Client",
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
            conn, resp = c._send(jar, method, path, body, ctx, "application/json", c.timeout)
            try:
                raw = resp.read(MAX_BODY)
            except (OSError, http.client.HTTPException) as e:
                raise Sent(e) from e
            finally:
                ctx.detach(conn)
                resp.close()
                conn.close()
        except NotSent as e:
            ctx.check_cancel()
            err = TransportError(str(e.__cause__), method=method, url=c._url(path))
            err.__cause__ = e.__cause__
            # Nothing was sent: any call may try again, but a
            # certificate that does not verify will not start to.
            if not isinstance(e.__cause__, ssl.SSLCertVerificationError):
                wait = _retry.decide(kind, attempt, transport=_retry.REFUSED, remaining=ctx.remaining(),
                                     policy=c._policy)
        except Sent as e:
            ctx.check_cancel()
            err = TransportError(str(e.__cause__ or "no answer"), method=method, url=c._url(path))
            err.__cause__ = e.__cause__
            if not ctx.expired():
                wait = _retry.decide(kind, attempt, transport=_retry.RESET, remaining=ctx.remaining(),
                                     policy=c._policy)
        else:
            if 200 <= resp.status < 300:
                if resp.status == 204 or not raw:
                    return None
                try:
                    env = json.loads(raw)
                    return env["data"]
                except (ValueError, KeyError, TypeError) as e:
                    raise ProtocolError(f"answer {resp.status} without a data envelope", status=resp.status,
                                        method=method, url=c._url(path)) from e
            err = api_error(resp, raw, method, c._url(path))
            if err.code in CREATION_LIMIT_CODES:
                raise err._copy_into(CreationLimitError, explain_creation_limit(err))
            if err.code == "MESSAGE_NOT_FOUND":
                raise err._copy_into(MessageNotFoundError)
            if resp.status == 429:
                err = err._copy_into(RateLimitedError)
            wait = _retry.decide(kind, attempt, status=err.status, code=err.code, retry_after=err.retry_after,
                                 remaining=ctx.remaining(), policy=c._policy)
        if wait is None:
            raise err
        info = RetryInfo(method, route(path), attempt, wait, err.status, err.code, str(err))
        log.debug("mayfly: retrying %s %s after %s (attempt %d, wait %.2fs)", method, info.path,
                  err.code or err.status or "a connection failure", attempt, wait)
        if c.on_retry is not None:
            c.on_retry(info)
        ctx.sleep(wait)



def route(path: str) -> str:
    """The path without its query: what logs and errors show."""
    return path.split("?", 1)[0]


def field(data: Any, name: str) -> Dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get(name), dict):
        raise ProtocolError(f"answer without data.{name}")
    return data[name]


def api_error(resp: http.client.HTTPResponse, raw: bytes, method: str, url: str) -> MayflyError:
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
        retry_after=_retry.parse_retry_after(resp.getheader("Retry-After")),
        method=method,
        url=url,
    )

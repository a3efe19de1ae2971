"""The event stream (GET /events) and its reconnects: what waits and
``events()`` follow. The parsing is _sse.py's; the waits between attempts
follow _retry.py, and after a stream that ends, its last ``retry:``
(clients/SCENARIOS.md, "Retries")."""

from __future__ import annotations

import codecs
import http.client
import json
import logging
import random
import time
from typing import Any, Generator, Iterator, Optional, Set, Tuple

from . import _retry
from ._ctx import Cancel, Ctx
from ._internal import InboxCore, transient
from ._sse import SSEParser
from ._transport import MAX_BODY, NotSent, Sent, api_error
from .errors import MayflyError, ProtocolError, TransportError, WaitTimeoutError
from .models import EVENT_MESSAGE_RECEIVED, Event, MessageSummary

log = logging.getLogger("mayfly")

_CHUNK = 64 << 10
#: The jitter added to a stream's retry: (seconds).
_JITTER = 0.25

Found = Tuple[MessageSummary, bool]


def open_stream(core: InboxCore, ctx: Ctx) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """GET /events. Raises InboxGoneError (401), CancelledError, or a
    transient MayflyError when the stream could not be opened."""
    c = core.client
    core.check_gone()
    url = c._url("/events")
    try:
        conn, resp = c._send(core.jar, "GET", "/events", None, ctx, "text/event-stream", c.stream_open_timeout)
    except (NotSent, Sent) as e:
        ctx.check_cancel()
        raise TransportError(str(e.__cause__), method="GET", url=url) from e.__cause__
    ok = False
    try:
        if resp.status != 200:
            err = api_error(resp, resp.read(MAX_BODY), "GET", url)
            if err.status == 401:
                raise core.mark_gone(err)
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


def reconnect_wait(attempt: int, err: Optional[MayflyError], retry_ms: Optional[int]) -> float:
    """The wait before opening the stream again: after a stream that ended,
    its last ``retry:`` (ms) plus jitter; after a refusal, the table (a
    ``Retry-After`` the table gives up on is still waited: a stream has only
    its deadline); else the backoff."""
    if err is None:
        if retry_ms is not None:
            return retry_ms / 1000 + random.uniform(0, _JITTER)
        return _retry.backoff(attempt)
    if err.status:
        wait = _retry.decide(_retry.WAIT, attempt, status=err.status, code=err.code, retry_after=err.retry_after)
        if wait is not None:
            return wait
        if err.retry_after is not None:
            return err.retry_after
    return _retry.backoff(attempt)


def follow(core: InboxCore, ctx: Ctx, existing: bool, fallback: bool) -> Iterator[Found]:
    """New messages across reconnects, as (summary, missed), each once.

    It lists the messages after every (re)connect (missed=True for what the
    list finds) and follows the stream. With ``existing`` the messages
    present at the start are yielded too; without, only marked seen. With
    ``fallback``, when the stream fails twice in a row it polls the list
    every poll interval until the deadline. When the service ends the
    stream because a newer stream on the same inbox took over (the comment
    ``: replaced ...``), it warns and polls for the replaced pause (60 s)
    before opening the stream again, so two programs following one inbox do
    not cut each other off in turn. Returns at the deadline; raises
    InboxGoneError and CancelledError."""
    c = core.client
    seen: Set[str] = set()
    last_list = [float("-inf")]  # when a list was last answered (or failed)
    if not existing:
        # What is there before the stream opens is not new: mark it seen.
        # What arrives before the stream opens is found by the list that
        # follows the opening.
        items = core.retrying(ctx, lambda: core.all(ctx))
        if items is None:
            return
        seen.update(m.id for m in items)
        last_list[0] = time.monotonic()
    failures = 0
    attempt = 0

    def catch_up() -> Iterator[Found]:
        items = core.all(ctx)
        last_list[0] = time.monotonic()  # after the answer
        for m in reversed(items):  # oldest first
            if m.id not in seen:
                seen.add(m.id)
                yield m, True

    def poll(until: Optional[float]) -> Generator[Found, None, bool]:
        """Lists every poll interval (the first an interval after the last
        list) until ``until`` (monotonic; None: no end). Returns False when
        the deadline passed first."""
        while True:
            nxt = last_list[0] + c.poll_interval
            if until is not None and nxt >= until:
                return ctx.sleep(max(0.0, until - time.monotonic()), clamp=True)
            if not ctx.sleep(max(0.0, nxt - time.monotonic()), clamp=True):
                return False
            try:
                yield from catch_up()
            except MayflyError as e:
                if not transient(e):
                    raise
                ctx.check_cancel()
                last_list[0] = time.monotonic()
                log.info("mayfly: listing the messages failed; trying again in %.0fs: %s", c.poll_interval, e)

    while True:
        ctx.check_cancel()
        if ctx.expired():
            return
        opened = time.monotonic()
        heard = replaced = False
        err: Optional[MayflyError] = None
        retry_ms: Optional[int] = None
        try:
            conn, resp = open_stream(core, ctx)
        except MayflyError as e:
            if not transient(e):
                raise
            err = e
            log.debug("mayfly: the event stream did not open: %s", e)
        else:
            parser = SSEParser()
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            try:
                yield from catch_up()
                while not replaced:
                    chunk = resp.read1(_CHUNK)
                    if not chunk:
                        break
                    heard = True
                    for ev in parser.push(decoder.decode(chunk)):
                        if ev.event != EVENT_MESSAGE_RECEIVED:
                            continue
                        try:
                            m = MessageSummary.from_json(json.loads(ev.data), core.address)
                        except (ValueError, KeyError, TypeError, AttributeError):
                            yield from catch_up()  # the payload is not the API's to define: list
                            continue
                        if m.id not in seen:
                            seen.add(m.id)
                            yield m, False
                    # The service's ": replaced by a newer stream on this
                    # inbox": another program took it over.
                    replaced = any(t.lstrip(" ").startswith("replaced") for t in parser.comments)
                    parser.comments.clear()
            except (OSError, http.client.HTTPException) as e:
                log.debug("mayfly: the event stream broke: %s", e)
            except MayflyError as e:
                if not transient(e):
                    raise
            finally:
                ctx.detach(conn)
                resp.close()
                conn.close()
            retry_ms = parser.retry
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
                # As the Go client: from here on the wait polls until its
                # deadline, and does not go back to the stream.
                log.info("mayfly: event stream unavailable; polling the message list every %.0fs", c.poll_interval)
                yield from poll(None)
                return
        if time.monotonic() - opened > 60:
            attempt = 0  # it ran a while: start the backoff over
        attempt += 1
        if not ctx.sleep(reconnect_wait(attempt, err, retry_ms), clamp=True):
            return


def timeout_error(core: InboxCore, what: str, timeout: Optional[float], ctx: Ctx, m: Any) -> WaitTimeoutError:
    """The wait-timeout error, saying why: the server unreachable (the last
    error, for how long), or the messages that arrived and matched none
    (``m``, a wait's matcher), or that none arrived."""
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
    return WaitTimeoutError(f"{head}: {why}", method=what, url=core.client.base_url)


def events(core: InboxCore, to: Optional[str], timeout: Optional[float], cancel: Cancel) -> Iterator[Event]:
    """:meth:`Inbox.events`."""
    want = None if to is None else to.strip().lower()
    with core.one_stream("events"):
        ctx, timeout = core.wait_ctx(timeout, cancel)
        with ctx:
            for m, missed in follow(core, ctx, existing=False, fallback=False):
                if want is not None and m.to != want:
                    continue
                yield Event(type=EVENT_MESSAGE_RECEIVED, message=m, missed=missed)
            ctx.check_cancel()
            raise timeout_error(core, "events", timeout, ctx, None)

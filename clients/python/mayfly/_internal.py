"""The inbox's shared private state: one object that the parts of an inbox
(_inbox.py, _events.py, _wait.py, _state.py, _recipient.py) share — its
client, cookie jar, last known mailbox, the ids it has returned, whether it
is gone, and its one event stream — with the calls every part makes with
the inbox's cookies."""

from __future__ import annotations

import contextlib
import http.cookiejar
import threading
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import _retry, _transport
from ._ctx import Cancel, Ctx, Reach
from .errors import (
    CancelledError,
    CreationLimitError,
    InboxGoneError,
    MayflyError,
    ProtocolError,
    RateLimitedError,
    StreamBusyError,
    TransportError,
    UnreachableError,
)
from .models import Mailbox, Message, MessageSummary, Page

if TYPE_CHECKING:
    from .client import Client


def transient(e: BaseException) -> bool:
    """Errors a wait or a stream outlives (until its deadline)."""
    if isinstance(e, (InboxGoneError, CancelledError, StreamBusyError, CreationLimitError, UnreachableError)):
        return False
    if isinstance(e, (TransportError, RateLimitedError, ProtocolError)):
        return True
    return isinstance(e, MayflyError) and (e.status >= 500 or e.status == 429)


class InboxCore:
    """The state of one inbox, shared by its parts; thread-safe."""

    def __init__(self, client: "Client", jar: http.cookiejar.CookieJar) -> None:
        self.client = client
        self.jar = jar
        self.mailbox: Optional[Mailbox] = None
        self.lock = threading.Lock()
        self.stream = threading.Lock()  # the inbox's one event stream
        self.gone: Optional[InboxGoneError] = None
        # The ids a wait or message() returned, in that order (a dict: an
        # ordered set); the state saves them as "seen".
        self.seen: Dict[str, None] = {}

    @property
    def address(self) -> str:
        assert self.mailbox is not None
        return self.mailbox.address

    def saw(self, id: str) -> None:
        with self.lock:
            self.seen[id] = None

    def is_seen(self, id: str) -> bool:
        with self.lock:
            return id in self.seen

    def check_gone(self) -> None:
        g = self.gone
        if g is not None:
            raise g._copy_into(type(g))

    def mark_gone(self, e: MayflyError, hint: str = "") -> InboxGoneError:
        """The gone error for e, the answer that showed it (a 401 is also a
        SessionInvalidError); the first one is kept for every later call."""
        if isinstance(e, InboxGoneError):
            g = e
        else:
            g = e._copy_into(InboxGoneError, f"inbox expired or deleted: {e.message}{hint}")  # type: ignore[assignment]
        with self.lock:
            if self.gone is None:
                self.gone = g
        return g

    def do(self, method: str, path: str, payload: Optional[Dict[str, Any]], kind: str, ctx: Ctx) -> Any:
        """A call with the inbox's cookies: any 401 means the inbox is gone."""
        self.check_gone()
        try:
            return self.client._call(self.jar, method, path, payload, kind, ctx)
        except MayflyError as e:
            if e.status == 401 and not isinstance(e, InboxGoneError):
                raise self.mark_gone(e) from None
            raise

    # The reads every part makes.

    def page(self, limit: int, offset: int, ctx: Ctx) -> Page:
        q = urllib.parse.urlencode({"limit": int(limit), "offset": int(offset)})
        data = self.do("GET", f"/messages?{q}", None, _retry.READ, ctx)
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise ProtocolError("answer without data.items")
        p = data.get("pagination") or {}
        return Page(
            items=[MessageSummary.from_json(i, self.address) for i in data["items"]],
            limit=int(p.get("limit", limit)),
            offset=int(p.get("offset", offset)),
            has_more=bool(p.get("has_more", False)),
        )

    def all(self, ctx: Ctx) -> List[MessageSummary]:
        """Every message, newest first (every page)."""
        out: List[MessageSummary] = []
        offset = 0
        while True:
            page = self.page(100, offset, ctx)
            out.extend(page.items)
            if not page.has_more or not page.items:
                return out
            offset += 100

    def message(self, id: str, ctx: Ctx) -> Message:
        data = self.do("GET", f"/messages/{urllib.parse.quote(str(id))}", None, _retry.READ, ctx)
        return Message.from_json(_transport.field(data, "message"), self.address)

    # What the waits and events share.

    @contextlib.contextmanager
    def one_stream(self, what: str) -> Iterator[None]:
        """Holds the inbox's one stream (its waits and events()) for a block;
        StreamBusyError when another holds it."""
        self.check_gone()
        if not self.stream.acquire(blocking=False):
            raise StreamBusyError("an event stream of this inbox is already open", method=what,
                                  url=self.client.base_url)
        try:
            yield
        finally:
            self.stream.release()

    def wait_ctx(self, timeout: Optional[float], cancel: Cancel) -> Tuple[Ctx, Optional[float]]:
        """The context of a wait: ``timeout`` (None: the client's
        wait_timeout), the watchdog on its deadline, and the count of its
        transport failures in a row (UnreachableError)."""
        if timeout is None:
            timeout = self.client.wait_timeout
        ctx = Ctx(timeout, cancel, watch_deadline=True)
        ctx.reach = Reach()
        return ctx, timeout

    def retrying(self, ctx: Ctx, fn: Callable[[], Any]) -> Any:
        """fn, again after transient failures, until the deadline (None)."""
        attempt = 0
        while True:
            try:
                return fn()
            except MayflyError as e:
                if not transient(e):
                    raise
                ctx.check_cancel()
            attempt += 1
            if not ctx.sleep(_retry.backoff(attempt), clamp=True):
                return None

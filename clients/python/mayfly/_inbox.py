"""An inbox: its lifecycle (select, current, extend, delete) and reads
(list, messages, message), its tagged addresses, and the entry points of
its waits (_wait.py) and events (_events.py). Its private state is one
object the parts share (_internal.py)."""

from __future__ import annotations

import http.cookiejar
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional

from . import _events, _recipient, _retry, _state, _transport, _wait
from ._ctx import Cancel, Ctx
from ._internal import InboxCore
from ._recipient import Recipient
from ._wait import Matcher, Regex, Since
from .errors import InboxGoneError, MayflyError, ProtocolError
from .models import Event, Mailbox, Message, MessageSummary, Page

if TYPE_CHECKING:
    from .client import Client


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

    def __init__(self, client: "Client", jar: http.cookiejar.CookieJar) -> None:
        #: The state the inbox's parts share (_internal.py).
        self._core = InboxCore(client, jar)

    @classmethod
    def _of(cls, core: InboxCore) -> "Inbox":
        inbox = cls.__new__(cls)
        inbox._core = core
        return inbox

    def __repr__(self) -> str:
        return f"<mayfly.Inbox {self.address}>"

    def __enter__(self) -> "Inbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    @property
    def mailbox(self) -> Mailbox:
        """The inbox as last seen (creation, select, current, extend)."""
        assert self._core.mailbox is not None
        return self._core.mailbox

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

    def recipient(self, tag: str) -> "Recipient":
        """A :class:`Recipient`: the tagged address :meth:`address_for`
        gives, with this inbox's waits scoped to it. No request."""
        return Recipient(self, tag)

    @property
    def gone(self) -> bool:
        """Whether the inbox is known to be gone (deleted, or the service no
        longer accepts it)."""
        return self._core.gone is not None

    def state(self) -> Dict[str, Any]:
        """What restores this inbox in another process (or in the Go or
        TypeScript client): a dict in the shared JSON format of
        clients/SCENARIOS.md — ``version``, ``base``, ``mailbox``, the jar's
        ``cookies`` (name, value, path, ``expires`` in RFC 3339 unless a
        session cookie, ``secure`` when set), the ``seen`` ids (oldest
        first) and ``gone`` when gone. ``json.dumps`` it; restore it with
        :meth:`Client.restore`. It holds the inbox's cookies: keep it as
        secret as the inbox (never log it)."""
        return _state.save(self._core)

    # Calls.

    def _check_scoped_cookie(self) -> None:
        suffix = "_" + self.id.replace("-", "").lower()
        for c in self._core.jar:
            if c.name.lower().endswith(suffix) and len(suffix) == 33:
                return
        raise ProtocolError(
            f"no mailbox-scoped cookie in the creation answer of {self.id} "
            "(a service on plain http must issue cookies without Secure: MAYFLY_COOKIE_SECURE=false)"
        )

    def _select(self, ctx: Ctx) -> Mailbox:
        self._core.check_gone()
        try:
            path = f"/mailboxes/{urllib.parse.quote(self.id)}/select"
            data = self._core.client._call(self._core.jar, "POST", path, None, _retry.WRITE, ctx)
        except MayflyError as e:
            if e.status == 404 and e.code in ("MAILBOX_NOT_FOUND", ""):
                raise self._core.mark_gone(e) from None
            if e.status == 401 and not isinstance(e, InboxGoneError):
                # Select is made with the inbox's cookies (the scoped one):
                # any 401 is gone, like a 401 to the session.
                hint = ""
                if self._core.client._scheme == "http" and any(c.secure for c in self._core.jar):
                    hint = " (the service set Secure cookies over plain http: set MAYFLY_COOKIE_SECURE=false)"
                raise self._core.mark_gone(e, hint) from None
            raise
        self._core.mailbox = Mailbox.from_json(_transport.field(data, "mailbox"))
        return self._core.mailbox

    def select(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """Opens a new session on the inbox with its scoped cookie (creation
        already did)."""
        with self._core.client._ctx(timeout, cancel) as ctx:
            return self._select(ctx)

    def current(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """The inbox as the service shows it now."""
        with self._core.client._ctx(timeout, cancel) as ctx:
            data = self._core.do("GET", "/mailboxes/current", None, _retry.READ, ctx)
            self._core.mailbox = Mailbox.from_json(_transport.field(data, "mailbox"))
            return self._core.mailbox

    def extend(self, minutes: int, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Mailbox:
        """Asks for ``minutes`` (1 to 10) more; returns the inbox with the
        expiry granted, which never passes ``max_expires_at`` (the grant may
        be smaller than asked, or none)."""
        with self._core.client._ctx(timeout, cancel) as ctx:
            data = self._core.do("PATCH", "/mailboxes/current", {"extension_minutes": int(minutes)}, _retry.WRITE, ctx)
            self._core.mailbox = Mailbox.from_json(_transport.field(data, "mailbox"))
            return self._core.mailbox

    def delete(self, *, timeout: Optional[float] = None, cancel: Cancel = None) -> bool:
        """Destroys the inbox and its messages; returns whether it existed.
        Idempotent: an inbox already gone (deleted before, by this object or
        another holder of its cookies, or expired) is success, and returns
        False (after this object's own delete without a request). From then
        on every other method raises :class:`InboxGoneError` without
        sending a request."""
        if self._core.gone is not None:
            return False
        try:
            with self._core.client._ctx(timeout, cancel) as ctx:
                self._core.do("DELETE", "/mailboxes/current", None, _retry.WRITE, ctx)
        except InboxGoneError:
            return False
        except MayflyError as e:
            if e.status != 404 or e.code != "MAILBOX_NOT_FOUND":
                raise
            self._core.mark_gone(e)
            return False
        self._core.mark_gone(InboxGoneError("inbox deleted", url=self._core.client.base_url))
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
        with self._core.client._ctx(timeout, cancel) as ctx:
            return self._core.page(limit, offset, ctx)

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

    def message(self, id: str, *, timeout: Optional[float] = None, cancel: Cancel = None) -> Message:
        """One message with its bodies. It counts as seen by a later
        ``wait_for_message(since="unseen")``."""
        with self._core.client._ctx(timeout, cancel) as ctx:
            m = self._core.message(id, ctx)
        self._core.saw(m.id)
        return m

    def delete_message(self, id: str, *, timeout: Optional[float] = None, cancel: Cancel = None) -> None:
        """Deletes one message."""
        with self._core.client._ctx(timeout, cancel) as ctx:
            self._core.do("DELETE", f"/messages/{urllib.parse.quote(str(id))}", None, _retry.WRITE, ctx)

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
        return _events.events(self._core, to, timeout, cancel)

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
        m = Matcher(subject, from_, text, match, 1, to)
        return _wait.waiting(self._core, "wait_for_message", m, since, timeout, cancel)[0]

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
        m = Matcher(subject, from_, text, match, count, to)
        return _wait.waiting(self._core, "wait_for_messages", m, since, timeout, cancel)

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
        m = Matcher(subject, from_, text, match, 1, to)
        _wait.expect_no_message(self._core, within, m, since, cancel)

"""Waits and their matchers: wait_for_message, wait_for_messages and
expect_no_message (clients/SCENARIOS.md, "Waiting for a message"), on the
inbox's shared state, following its event stream (_events.py)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable, List, Optional, Pattern, Union

from ._ctx import Cancel, Ctx
from ._events import follow, timeout_error
from ._internal import InboxCore
from .errors import MayflyError, MessageNotFoundError, UnexpectedMessageError
from .models import STATUS_PENDING, Message, MessageSummary

Since = Union[str, datetime, MessageSummary]
Regex = Union[str, Pattern[str], None]


def compile_rx(rx: Regex) -> Optional[Pattern[str]]:
    if rx is None:
        return None
    return re.compile(rx) if isinstance(rx, str) else rx


class Matcher:
    """The conditions of a wait, and what it has met: the messages found,
    and the new ones that matched none (for the wait-timeout error)."""

    def __init__(self, subject: Regex, from_: Regex, text: Regex,
                 match: Optional[Callable[[Message], bool]], want: int, to: Optional[str] = None) -> None:
        self.subject, self.from_, self.text = compile_rx(subject), compile_rx(from_), compile_rx(text)
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


def expect_no_message(core: InboxCore, within: float, m: Matcher, since: Since, cancel: Cancel) -> None:
    """:meth:`Inbox.expect_no_message`."""
    with core.one_stream("expect_no_message"):
        ctx, _ = core.wait_ctx(within, cancel)
        with ctx:
            new = since_filter(core, ctx, since, "expect_no_message")
            if new is not None:
                collect(core, ctx, new, m)
        if new is not None and not m.found:
            # The window is over: one more list, as a plain call, to
            # see what arrived since the stream last spoke.
            with core.client._ctx(None, cancel) as last:
                for s in reversed(core.all(last)):
                    if m.found or not new(s) or not m.summary_ok(s):
                        continue
                    msg = full(core, last, s.id)
                    if msg is not None and m.full_ok(msg):
                        m.found.append(msg)
    if new is None:
        ctx.check_cancel()
        raise timeout_error(core, "expect_no_message", within, ctx, None)
    if m.found:
        got = m.found[0]
        core.saw(got.id)
        e = UnexpectedMessageError(
            f"a matching message arrived within {within:g}s: {got.subject!r} from {got.from_!r}",
            code="UNEXPECTED_MESSAGE", method="expect_no_message", url=core.client.base_url,
        )
        e.received = got
        raise e


def waiting(core: InboxCore, what: str, m: Matcher, since: Since, timeout: Optional[float],
            cancel: Cancel) -> List[Message]:
    """The waits: m.want messages that match m and are new per since."""
    count = m.want
    with core.one_stream(what):
        ctx, timeout = core.wait_ctx(timeout, cancel)
        with ctx:
            new = since_filter(core, ctx, since, what)
            if new is not None:
                collect(core, ctx, new, m)
            if len(m.found) < count:
                ctx.check_cancel()
                raise timeout_error(core, what, timeout, ctx, m)
    for msg in m.found:
        core.saw(msg.id)
    return m.found


def since_filter(core: InboxCore, ctx: Ctx, since: Since, what: str) -> Optional[Callable[[MessageSummary], bool]]:
    """Whether a message is new in the sense of ``since``; None when the
    deadline passed before the inbox could be listed ("now", an id)."""
    if isinstance(since, MessageSummary):
        since = since.id
    if isinstance(since, datetime):
        after = since if since.tzinfo is not None else since.replace(tzinfo=timezone.utc)
        return lambda s: s.received_at is not None and s.received_at > after
    if since == "unseen":
        return lambda s: not core.is_seen(s.id)
    items = core.retrying(ctx, lambda: core.all(ctx))
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
            status=404, code="MESSAGE_NOT_FOUND", method=what, url=core.client.base_url,
        )
    return lambda s: s.id not in old


def collect(core: InboxCore, ctx: Ctx, new: Callable[[MessageSummary], bool], m: "Matcher") -> None:
    """Follows the inbox (what is there first, oldest first) into
    m.found until it holds m.want messages or the deadline passes."""
    for summary, _ in follow(core, ctx, existing=True, fallback=True):
        if not new(summary):
            continue
        if not m.summary_ok(summary):
            m.other(summary.subject)
            continue
        msg = full(core, ctx, summary.id)
        if msg is None:
            continue
        if not m.full_ok(msg):
            m.other(msg.subject)
            continue
        m.found.append(msg)
        if len(m.found) >= m.want:
            return


def full(core: InboxCore, ctx: Ctx, id: str) -> Optional[Message]:
    """The message with its bodies once it is no longer pending; None if
    it went away (deleted, evicted)."""
    while True:
        try:
            msg = core.retrying(ctx, lambda: core.message(id, ctx))
        except MayflyError as e:
            if e.status == 404:
                return None
            raise
        if msg is None:
            return None
        if msg.status != STATUS_PENDING:
            return msg
        if not ctx.sleep(core.client.poll_interval, clamp=True):
            return None

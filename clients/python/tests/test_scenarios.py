"""The scenarios of clients/SCENARIOS.md against a real stack (conftest.py):
each test names its scenario id in a `scenario:` comment."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

import mayfly
from mayfly import CancelledError, InboxGoneError, StreamBusyError, WaitTimeoutError


def test_signup_flow(stack, client):
    # scenario: signup-flow
    inbox = client.create_inbox(lifetime_minutes=5)
    assert inbox.address.endswith("@mayfly.test")
    stack.send(inbox.address, "Your code", "Welcome! Your code is 482913.\n")
    msg = inbox.wait_for_message(subject="^Your code$", timeout=15)
    assert msg.subject == "Your code"
    assert msg.status == mayfly.STATUS_READY
    assert mayfly.code(msg) == "482913"
    inbox.delete()
    assert inbox.gone
    with pytest.raises(InboxGoneError):
        inbox.current()


def test_resend_code(stack, inbox):
    # scenario: resend-code
    stack.send(inbox.address, "Your code", "Your code is 111111\n")
    first = inbox.wait_for_message(subject="Your code", timeout=15)
    assert mayfly.code(first) == "111111"
    stack.send(inbox.address, "Your code", "Your code is 222222\n")
    second = inbox.wait_for_message(subject="Your code", timeout=15)
    assert mayfly.code(second) == "222222"
    assert second.id != first.id


def fresh_second():
    """Sleeps until 20 ms into the next whole second of the clock the
    stack's request rate (8 a second per IP) counts in."""
    time.sleep((1.02 - time.time() % 1.0) % 1.0)


def test_parallel_creates(client):
    # scenario: parallel-creates
    # Twelve creations at once: more POST /mailboxes in one second than the
    # request rate (8/s) allows, so creations themselves meet request-rate
    # 429s and are retried (with six, only the selects that follow would).
    retries = []
    c = mayfly.Client(client.base_url, on_retry=retries.append)
    # The request rate counts whole seconds of the node's clock: start the
    # burst early in one, so the twelve POSTs meet one window's limit.
    fresh_second()
    with ThreadPoolExecutor(12) as pool:
        inboxes = list(pool.map(lambda _: c.create_inbox(lifetime_minutes=1), range(12)))
    try:
        assert len({ib.id for ib in inboxes}) == 12
        for ib in inboxes:
            assert ib.mailbox.kind == "temporary"
    finally:
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(lambda ib: ib.delete(), inboxes))
    assert all(r.status == 429 and r.code == "RATE_LIMITED" for r in retries), retries
    assert any(r.method == "POST" and r.path == "/mailboxes" for r in retries), retries


def test_edge_restart_mid_wait(stack, inbox):
    # scenario: edge-restart-mid-wait
    result = {}

    def wait():
        try:
            result["msg"] = inbox.wait_for_message(subject="after the restart", timeout=30)
        except BaseException as e:  # noqa: B902 - reported below
            result["err"] = e

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(1.0)  # the wait is following the stream
    stack.stop()
    with pytest.raises(OSError):  # the port refuses connections
        import socket

        socket.create_connection(("127.0.0.1", int(stack.http.rsplit(":", 1)[1])), timeout=1).close()
    time.sleep(3.0)
    stack.start()
    stack.send(inbox.address, "after the restart", "Your code is 777777\n")
    t.join(35)
    assert not t.is_alive()
    assert "err" not in result, result.get("err")
    assert mayfly.code(result["msg"]) == "777777"


def test_deleted_inbox_every_call(stack, client):
    # scenario: deleted-inbox-every-call
    inbox = client.create_inbox(lifetime_minutes=1)
    stack.send(inbox.address, "kept", "hello 123456\n")
    msg = inbox.wait_for_message(subject="kept", timeout=15)
    assert inbox.delete() is True
    sent = []
    orig = client._send
    client._send = lambda *a, **k: sent.append(a) or orig(*a, **k)  # type: ignore[assignment]
    try:
        assert inbox.delete() is False  # idempotent (delete-idempotent)
        calls = {
            "current": lambda: inbox.current(),
            "select": lambda: inbox.select(),
            "extend": lambda: inbox.extend(1),
            "list": lambda: inbox.list(),
            "messages": lambda: next(inbox.messages()),
            "message": lambda: inbox.message(msg.id),
            "delete_message": lambda: inbox.delete_message(msg.id),
            "events": lambda: next(inbox.events(timeout=2)),
            "wait_for_message": lambda: inbox.wait_for_message(timeout=2),
            "wait_for_messages": lambda: inbox.wait_for_messages(1, timeout=2),
            # Nothing can arrive in a gone inbox: that is no pass.
            "expect_no_message": lambda: inbox.expect_no_message(within=1),
        }
        for name, call in calls.items():
            with pytest.raises(InboxGoneError):
                call()
                pytest.fail(f"{name} did not raise")
    finally:
        client._send = orig  # type: ignore[assignment]
    assert sent == [], "a request was sent after delete()"


def test_deleted_by_the_service_is_gone(stack, client):
    # scenario: deleted-inbox-every-call (the service no longer accepts the session)
    inbox = client.create_inbox(lifetime_minutes=1)
    # Another holder of the same cookies deletes it: this object learns it
    # from the service's 401 and from then on sends nothing.
    import copy
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    for c in inbox._core.jar:
        jar.set_cookie(copy.copy(c))
    other = mayfly.Inbox(client, jar)
    other._core.mailbox = inbox.mailbox
    other.delete()
    with pytest.raises(InboxGoneError) as e:
        inbox.list()
    assert e.value.status == 401 and e.value.code == "MAILBOX_SESSION_INVALID"
    with pytest.raises(InboxGoneError):
        inbox.select()  # 404 MAILBOX_NOT_FOUND, or no request at all
    with pytest.raises(InboxGoneError):
        inbox.wait_for_message(timeout=2)


def test_events_end_when_the_inbox_is_deleted(client):
    import copy
    import http.cookiejar

    inbox = client.create_inbox(lifetime_minutes=1)
    jar = http.cookiejar.CookieJar()
    for c in inbox._core.jar:
        jar.set_cookie(copy.copy(c))
    other = mayfly.Inbox(client, jar)
    other._core.mailbox = inbox.mailbox
    result = {}

    def follow():
        try:
            for ev in inbox.events(timeout=15):
                result["event"] = ev
        except BaseException as e:  # noqa: B902 - asserted below
            result["err"] = e

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.5)
    other.delete()
    t.join(20)
    assert isinstance(result.get("err"), InboxGoneError), result


def test_replaced_stream_polls(stack, client, caplog):
    # Two programs follow one inbox (copies of one jar): the service keeps
    # one stream per inbox and ends the older with ": replaced ...". That
    # one warns and polls the list instead of taking the stream back; both
    # get the message.
    import copy
    import http.cookiejar

    inbox = client.create_inbox(lifetime_minutes=1)
    jar = http.cookiejar.CookieJar()
    for ck in inbox._core.jar:
        jar.set_cookie(copy.copy(ck))
    other = mayfly.Inbox(client, jar)
    other._core.mailbox = inbox.mailbox
    inbox._core.client.poll_interval = 1.0  # below the API's floor: only for this test (the same Client)
    got = []

    def follow():
        try:
            for ev in inbox.events(timeout=12):
                got.append(ev)
                return
        except BaseException as e:  # noqa: B902 - asserted below
            got.append(e)

    try:
        with caplog.at_level("WARNING", logger="mayfly"):
            t = threading.Thread(target=follow)
            t.start()
            time.sleep(1.5)  # the first stream is open
            result = {}
            w = threading.Thread(target=lambda: result.setdefault("m", other.wait_for_message(since="now", subject="both", timeout=15)))
            w.start()
            time.sleep(1.5)  # the second stream took over
            stack.send(inbox.address, "both", "Your code is 424242\n")
            w.join(20)
            t.join(20)
        assert mayfly.code(result["m"]) == "424242"
        assert len(got) == 1 and isinstance(got[0], mayfly.Event) and got[0].message.subject == "both", got
        assert got[0].missed  # found by the polling list, not the stream
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "mayfly"]
        assert len(warnings) == 1 and "another client opened one on this inbox" in warnings[0], warnings
    finally:
        inbox._core.client.poll_interval = mayfly.MIN_POLL_INTERVAL
        inbox.delete()


def test_rate_limit_429_retried(stack, inbox):
    # scenario: rate-limit-429-retried
    retries = []
    inbox._core.client.on_retry = retries.append
    try:
        with ThreadPoolExecutor(20) as pool:
            pages = list(pool.map(lambda _: inbox.list(limit=5), range(20)))
    finally:
        inbox._core.client.on_retry = None
    assert len(pages) == 20 and all(p.items == [] for p in pages)
    assert any(r.status == 429 and r.code == "RATE_LIMITED" for r in retries), retries
    assert all(r.wait >= 1.0 for r in retries if r.code == "RATE_LIMITED")


def test_html_only_link_and_code(stack, inbox):
    # scenario: html-only-link-and-code
    html = (
        '<html><body><p>Confirm your account: '
        '<a href="https://app.example/confirm?user=42&amp;token=abc">confirm</a></p>'
        "<table><tr><td>2026</td><td>583104</td></tr></table>"
        "<p>Your code is <b>583104</b>.</p></body></html>"
    )
    stack.send(inbox.address, "Confirm", html=html)
    msg = inbox.wait_for_message(subject="Confirm", timeout=15)
    assert "583104" in msg.html_body or "583104" in msg.text_body
    got = mayfly.links(msg)
    assert "https://app.example/confirm?user=42&token=abc" in got, got
    assert not any("&amp;" in u for u in got), got
    assert mayfly.code(msg) == "583104"  # next to "code", not the year in the table
    assert mayfly.code(msg, r"code is\s+(\d+)") == "583104"


def test_wait_timeout(inbox):
    # scenario: wait-timeout
    t0 = time.monotonic()
    with pytest.raises(WaitTimeoutError) as e:
        inbox.wait_for_message(subject="never", timeout=2)
    elapsed = time.monotonic() - t0
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, mayfly.MayflyError)
    assert 2.0 <= elapsed < 3.5, elapsed


def test_cancellation(inbox):
    # scenario: cancellation
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(CancelledError):
        inbox.wait_for_message(subject="never", timeout=30, cancel=cancel)
    elapsed = time.monotonic() - t0
    assert 0.5 <= elapsed < 1.5, elapsed  # at once (slack for a loaded machine)
    # The stream is closed and released: a new wait may start. A callable
    # cancels too.
    end = time.monotonic() + 0.5
    t0 = time.monotonic()
    with pytest.raises(CancelledError):
        inbox.wait_for_message(subject="never", timeout=30, cancel=lambda: time.monotonic() >= end)
    assert time.monotonic() - t0 < 1.5


# Beyond the scenarios: the since modes, events, the jar.


def test_since_modes(stack, inbox):
    stack.send(inbox.address, "one", "1111\n")
    one = inbox.wait_for_message(subject="one", timeout=15)
    stack.send(inbox.address, "two", "2222\n")
    two = inbox.wait_for_message(subject="two", timeout=15)
    # since a message id: received after it.
    assert inbox.wait_for_message(since=one.id, timeout=5).id == two.id
    # since a time: received strictly after it.
    assert inbox.wait_for_message(since=one.received_at, timeout=5).id == two.id
    # unseen: both were returned already, so only a new one.
    with pytest.raises(WaitTimeoutError):
        inbox.wait_for_message(timeout=1)
    # now: not what is there; a new one, and among several the oldest.
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("m", inbox.wait_for_message(since="now", timeout=15)))
    t.start()
    time.sleep(1.5)  # past its first list, even after a request-rate retry
    stack.send(inbox.address, "three", "3333\n")
    t.join(20)
    assert result["m"].subject == "three"
    # Among several qualifying, the oldest.
    assert inbox.wait_for_message(since=datetime(2000, 1, 1, tzinfo=timezone.utc), timeout=5).id == one.id


def test_events_and_stream_busy(stack, inbox):
    events = inbox.events(timeout=15)
    got = []

    def consume():
        for ev in events:
            got.append(ev)
            return

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(1.5)  # past its first list, even after a request-rate retry
    with pytest.raises(StreamBusyError):
        inbox.wait_for_message(timeout=1)
    stack.send(inbox.address, "evented", "hello\n")
    t.join(20)
    events.close()
    assert got and got[0].type == mayfly.EVENT_MESSAGE_RECEIVED and got[0].message.subject == "evented"


def test_cookie_jar_host_only_plain_http(client, inbox):
    cookies = {c.name: c for c in inbox._core.jar}
    scoped = "mayfly_" + inbox.id.replace("-", "")
    assert set(cookies) == {scoped, "service_session"}
    for c in cookies.values():
        assert c.domain == "127.0.0.1" and not c.domain_specified  # host-only
        assert c.path == "/v1" and not c.secure
    # Another host does not get them; neither does another path.
    import urllib.request

    for url in ("http://127.0.0.2/v1/messages", "http://127.0.0.1/other"):
        req = urllib.request.Request(url)
        inbox._core.jar.add_cookie_header(req)
        assert req.get_header("Cookie") is None, url
    inbox.delete()
    assert {c.name for c in inbox._core.jar} == {scoped}  # the session is cleared


def test_cookie_jar_localhost(stack):
    # "localhost" has no dot: http.cookiejar files its cookies under
    # "localhost.local"; they must still go back.
    port = stack.http.rsplit(":", 1)[1]
    c = mayfly.Client(f"http://localhost:{port}/v1")
    with c.create_inbox(lifetime_minutes=1) as inbox:
        assert inbox.list().items == []


def test_stream_outlives_its_open_timeout(stack, caplog):
    # The open timeout bounds opening only; an open stream may stay silent
    # up to the idle timeout (heartbeats come every 20 s).
    c = mayfly.Client(stack.base_url, stream_open_timeout=0.3)
    opens = []
    orig = c._send

    def send(jar, method, path, *a, **k):
        if path == "/events":
            opens.append(time.monotonic())
        return orig(jar, method, path, *a, **k)

    c._send = send  # type: ignore[assignment]
    # The stack allows 8 requests a second per IP, and the tests before may
    # have spent this second's: a 429 on the stream's opening would open it
    # twice. Start early in a fresh second (the creation and the opening
    # are two requests).
    fresh_second()
    with c.create_inbox(lifetime_minutes=1) as inbox:
        t0 = time.monotonic()
        with pytest.raises(WaitTimeoutError):
            inbox.wait_for_message(timeout=1.5)
    # One stream for the whole wait: it was not reconnected after 0.3 s
    # (counted from the requests, not from the log's wording).
    assert len(opens) == 1 and opens[0] - t0 < 0.3, opens


def test_dataclasses_match_the_served_openapi_document(stack):
    # The resources' fields are the schemas' (from is from_), checked
    # against the document the edge serves.
    import dataclasses
    import re
    import urllib.request

    with urllib.request.urlopen(stack.base_url + "/openapi.yaml", timeout=5) as r:
        doc = r.read().decode()
    for cls in (mayfly.Mailbox, mayfly.MessageSummary, mayfly.Message):
        m = re.search(rf"^    {cls.__name__}:\n(?:      .*\n)*?      required: \[([^\]]*)\]", doc, re.M)
        assert m, f"schema {cls.__name__} not in the document"
        want = {f.strip() for f in m.group(1).split(",")}
        got = {"from" if f.name == "from_" else f.name for f in dataclasses.fields(cls)}
        if cls is not mayfly.Mailbox:
            # to: optional in the document (a node of an older release
            # omits it), filled in by the client.
            nxt = re.compile(r"^    \S", re.M).search(doc, m.end())
            block = doc[m.start():nxt.start() if nxt else len(doc)]
            assert "\n        to:\n" in block, cls.__name__
            want.add("to")
        assert got == want, cls.__name__


# The scenarios of the client contract's second round (issues 27 and 30).


def _other_holder(client, inbox):
    """Another Inbox object over a copy of inbox's jar: another program that
    holds the same cookies."""
    import copy
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    for c in inbox._core.jar:
        jar.set_cookie(copy.copy(c))
    other = mayfly.Inbox(client, jar)
    other._core.mailbox = inbox.mailbox
    return other


def test_default_timeout(stack):
    # scenario: default-timeout
    c = mayfly.Client(stack.base_url)
    assert c.wait_timeout == 20.0
    with c.create_inbox(lifetime_minutes=2) as inbox:
        t0 = time.monotonic()
        with pytest.raises(WaitTimeoutError) as e:
            inbox.wait_for_message(subject="never")  # no timeout given
        elapsed = time.monotonic() - t0
    assert 20.0 <= elapsed < 22.0, elapsed
    assert "within 20s" in str(e.value), str(e.value)


def test_failed_message_returned(stack, inbox):
    # scenario: failed-message-returned
    raw = (b"  a leading continuation line makes the header unreadable\r\n"
           b"From: Eve <eve@example.org>\r\nSubject: Cannot be parsed\r\n"
           b"Content-Type: text/plain\r\n\r\nnever shown\r\n")
    stack.send_raw(inbox.address, raw)
    msg = inbox.wait_for_message(timeout=15)
    assert msg.status == mayfly.STATUS_FAILED
    assert msg.text_body == "" and msg.html_body == ""


def test_since_unknown_id(inbox):
    # scenario: since-unknown-id
    with pytest.raises(mayfly.MessageNotFoundError) as e:
        inbox.wait_for_message(since="00000000-0000-4000-8000-000000000000", timeout=5)
    assert isinstance(e.value, mayfly.MayflyError) and not isinstance(e.value, ValueError)
    assert e.value.code == "MESSAGE_NOT_FOUND"
    # The service's own 404 for an unknown message is the same kind.
    with pytest.raises(mayfly.MessageNotFoundError) as e:
        inbox.message("00000000-0000-4000-8000-000000000000")
    assert e.value.status == 404 and e.value.code == "MESSAGE_NOT_FOUND"


def test_gone_is_session_invalid(client):
    # scenario: gone-is-session-invalid
    inbox = client.create_inbox(lifetime_minutes=1)
    _other_holder(client, inbox).delete()
    with pytest.raises(mayfly.SessionInvalidError) as e:
        inbox.list()  # the service's 401
    assert isinstance(e.value, mayfly.InboxGoneError)
    mine = client.create_inbox(lifetime_minutes=1)
    mine.delete()
    with pytest.raises(mayfly.SessionInvalidError) as e:
        mine.list()  # after its own delete: no request
    assert isinstance(e.value, mayfly.InboxGoneError)


def test_extend_returns_mailbox(inbox):
    # scenario: extend-returns-mailbox
    before = inbox.mailbox
    mb = inbox.extend(1)
    assert isinstance(mb, mayfly.Mailbox)
    assert mb.id == before.id and mb.address == before.address
    assert before.expires_at < mb.expires_at <= mb.max_expires_at
    assert inbox.mailbox == mb


def test_events_timeout(stack, inbox, monkeypatch):
    # scenario: events-timeout
    got = []
    t0 = time.monotonic()
    with pytest.raises(WaitTimeoutError):
        for ev in inbox.events(timeout=2):
            got.append(ev)
    elapsed = time.monotonic() - t0
    assert got == [] and 2.0 <= elapsed < 3.5, elapsed
    # An event before the deadline is yielded, then the deadline ends it
    # with the same error. The mail is sent once events() has started, when
    # it opens the stream (after its first list): a fixed delay races that
    # first list on a loaded machine, and mail from before it is not yielded.
    import mayfly._events as events_mod

    opened = threading.Event()
    real_open = events_mod.open_stream

    def open_and_send(core, ctx):
        out = real_open(core, ctx)
        if not opened.is_set():
            opened.set()
            stack.send(inbox.address, "evented", "hi\n")
        return out

    monkeypatch.setattr(events_mod, "open_stream", open_and_send)
    with pytest.raises(WaitTimeoutError):
        for ev in inbox.events(timeout=4):
            got.append(ev)
    assert opened.is_set()
    assert [e.message.subject for e in got] == ["evented"]


def test_gone_getter(client):
    # scenario: gone-getter
    inbox = client.create_inbox(lifetime_minutes=1)
    assert inbox.gone is False
    _other_holder(client, inbox).delete()
    assert inbox.gone is False  # not known yet
    with pytest.raises(InboxGoneError):
        inbox.current()
    assert inbox.gone is True
    mine = client.create_inbox(lifetime_minutes=1)
    mine.delete()
    assert mine.gone is True


def test_state_round_trip(stack, client, tmp_path):
    # scenario: state-round-trip
    import json
    import subprocess
    import sys
    from pathlib import Path

    inbox = client.create_inbox(lifetime_minutes=2)
    try:
        stack.send(inbox.address, "first", "code 111111\n")
        first = inbox.wait_for_message(subject="first", timeout=15)
        state = inbox.state()
        assert state["version"] == 1 and state["base"] == stack.base_url
        assert state["mailbox"]["id"] == inbox.id and state["mailbox"]["address"] == inbox.address
        assert state["mailbox"]["expires_at"].endswith("Z")
        assert state["seen"] == [first.id] and "gone" not in state
        names = {c["name"] for c in state["cookies"]}
        assert names == {"mayfly_" + inbox.id.replace("-", ""), "service_session"}
        for c in state["cookies"]:
            assert c["path"] == "/v1" and "secure" not in c  # plain http
            if "expires" in c:
                assert mayfly.models.parse_time(c["expires"]) is not None
        # Restored elsewhere (here: another Client, through JSON text), it
        # makes no request, knows what was seen, and works.
        other = mayfly.Client(stack.base_url)
        sent = []
        orig = other._send
        other._send = lambda *a, **k: sent.append(a) or orig(*a, **k)  # type: ignore[assignment]
        restored = other.restore(json.dumps(state))
        assert sent == [] and restored.address == inbox.address and restored.mailbox == inbox.mailbox
        stack.send(inbox.address, "second", "code 222222\n")
        assert mayfly.code(restored.wait_for_message(timeout=15)) == "222222"  # unseen: not `first`
        # Through the state tool, as the Go and TypeScript clients run it.
        stack.send(inbox.address, "third", "code 333333\n")
        tool = Path(__file__).resolve().parent / "state_tool.py"
        r = subprocess.run([sys.executable, str(tool), "15"], input=json.dumps(restored.state()),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["subject"] == "third"
        assert len(out["state"]["seen"]) == 3 and out["state"]["seen"][:2] == [first.id, restored.state()["seen"][1]]
        # A state of a gone inbox restores gone; the tool fails with exit 1.
        restored.delete()
        gone = restored.state()
        assert gone["gone"] is True
        with pytest.raises(InboxGoneError):
            mayfly.Client(stack.base_url).restore(gone).list()
        r = subprocess.run([sys.executable, str(tool), "2"], input=json.dumps(gone),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "gone" in r.stderr and r.stdout == ""
    finally:
        inbox.delete()


def test_links_with_text(stack, inbox):
    # scenario: links-with-text
    html = ('<p>Hello, <a href="https://app.example/verify?u=42&amp;t=abc">Verify my email</a> or '
            '<a href="https://app.example/help">get <b>help</b></a>.</p>')
    stack.send(inbox.address, "Verify", text="Or open https://app.example/start\n", html=html)
    msg = inbox.wait_for_message(subject="Verify", timeout=15)
    got = mayfly.links_with_text(msg)
    assert ("https://app.example/verify?u=42&t=abc", "Verify my email") in got, got
    assert ("https://app.example/help", "get help") in got, got
    assert ("https://app.example/start", "") in got, got
    assert [link.url for link in got] == mayfly.links(msg)
    verify = next(link.url for link in got if link.text == "Verify my email")
    assert verify == "https://app.example/verify?u=42&t=abc"


def test_code_prefers_keyword(stack, inbox):
    # scenario: code-prefers-keyword
    stack.send(inbox.address, "Order 2026 confirmed",
               "Order #2026 placed 2026-11-24 for 3 items.\nYour verification code is 482913\n")
    msg = inbox.wait_for_message(subject="Order", timeout=15)
    assert mayfly.code(msg) == "482913"
    assert mayfly.codes(msg) == ["2026", "2026", "482913"]


def test_wait_count(stack, inbox):
    # scenario: wait-count
    stack.send(inbox.address, "noise", "not this one\n")
    for i in (1, 2, 3):
        stack.send(inbox.address, f"Your code {i}", f"code {i}{i}{i}{i}{i}{i}\n")
    got = inbox.wait_for_messages(3, subject="^Your code", timeout=20)
    assert [m.subject for m in got] == ["Your code 1", "Your code 2", "Your code 3"]  # oldest first
    # They are seen: the next wait for the same match gets none of them.
    with pytest.raises(WaitTimeoutError):
        inbox.wait_for_message(subject="^Your code", timeout=1.5)
    # Fewer than asked by the deadline: the wait-timeout error says so.
    stack.send(inbox.address, "Your code 4", "code 444444\n")
    with pytest.raises(WaitTimeoutError) as e:
        inbox.wait_for_messages(2, subject="^Your code", timeout=3)
    assert "1 of 2 matching messages" in str(e.value), str(e.value)
    assert mayfly.code(inbox.wait_for_message(subject="^Your code", timeout=5)) == "444444"  # not marked seen


def test_expect_no_message(stack, inbox):
    # scenario: expect-no-message
    stack.send(inbox.address, "Your code", "code 111111\n")
    inbox.wait_for_message(subject="Your code", timeout=15)
    t0 = time.monotonic()
    inbox.expect_no_message(2, subject="Your code")  # the first one is seen: nothing new
    assert 2.0 <= time.monotonic() - t0 < 4.0
    threading.Timer(0.5, lambda: stack.send(inbox.address, "Your code", "code 222222\n")).start()
    t0 = time.monotonic()
    with pytest.raises(mayfly.UnexpectedMessageError) as e:
        inbox.expect_no_message(10, subject="Your code")
    assert time.monotonic() - t0 < 8.0  # as soon as it arrives, not at the end of the window
    assert mayfly.code(e.value.received) == "222222"
    assert isinstance(e.value, mayfly.MayflyError)
    # Another subject does not count.
    threading.Timer(0.3, lambda: stack.send(inbox.address, "Newsletter", "hi\n")).start()
    inbox.expect_no_message(2, subject="Your code")


def test_expect_no_message_fails_when_the_server_is_down(make_stack):
    # An absence the client could not observe is not a success.
    s = make_stack()
    c = mayfly.Client(s.base_url, max_attempts=2)
    inbox = c.create_inbox(lifetime_minutes=1)
    s.stop()
    with pytest.raises(mayfly.TransportError):
        inbox.expect_no_message(1.5, subject="Your code")


def test_wait_for_capacity(make_stack):
    # scenario: wait-for-capacity
    s = make_stack(MAYFLY_RATE_ACTIVE_PER_IP="2")
    c = mayfly.Client(s.base_url)
    a, b = c.create_inbox(lifetime_minutes=1), c.create_inbox(lifetime_minutes=1)
    t0 = time.monotonic()
    with pytest.raises(mayfly.CreationLimitError) as e:
        c.create_inbox(lifetime_minutes=1)  # the default: fail at once
    assert e.value.code == "ACTIVE_INBOX_LIMIT" and time.monotonic() - t0 < 1.0
    threading.Timer(1.5, a.delete).start()
    t0 = time.monotonic()
    third = c.create_inbox(lifetime_minutes=1, wait_for_capacity=True, timeout=10)
    assert 1.5 <= time.monotonic() - t0 < 5.0
    # Within the caller's deadline only.
    t0 = time.monotonic()
    with pytest.raises(mayfly.CreationLimitError):
        c.create_inbox(lifetime_minutes=1, wait_for_capacity=True, timeout=2)
    assert 1.0 <= time.monotonic() - t0 < 3.0
    for ib in (b, third):
        ib.delete()


def test_runner_fixture(stack, pytester, monkeypatch):
    # scenario: runner-fixture
    # The fixture is configured by ini options (here pytest.ini), without
    # overriding it; the environment beats the ini file, the command line
    # beats both.
    monkeypatch.delenv("MAYFLY_URL", raising=False)
    monkeypatch.delenv("MAYFLY_TIMEOUT", raising=False)
    pytester.makeini(f"[pytest]\nmayfly_url = {stack.base_url}\nmayfly_timeout = 1.5\nmayfly_lifetime = 2\n")
    pytester.makepyfile(
        """
        import time
        import pytest
        import mayfly

        def test_configured(mayfly_inbox, mayfly_client):
            assert mayfly_client.wait_timeout == float(__import__("os").environ.get("WANT", "1.5"))
            t0 = time.monotonic()
            with pytest.raises(mayfly.WaitTimeoutError):
                mayfly_inbox.wait_for_message(subject="never")
            assert mayfly_client.wait_timeout <= time.monotonic() - t0 < mayfly_client.wait_timeout + 1.5
            exp = mayfly_inbox.mailbox.expires_at - mayfly_inbox.mailbox.expires_at.now(mayfly_inbox.mailbox.expires_at.tzinfo)
            assert 60 < exp.total_seconds() <= 120

        def test_deletes_its_own_inbox(mayfly_inbox):
            assert mayfly_inbox.delete() is True  # the fixture's teardown is fine with it
        """
    )
    pytester.runpytest("-p", "mayfly.pytest_plugin").assert_outcomes(passed=2)
    monkeypatch.setenv("MAYFLY_TIMEOUT", "2.5")
    monkeypatch.setenv("WANT", "2.5")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "-k", "configured").assert_outcomes(passed=1, deselected=1)
    monkeypatch.setenv("WANT", "1")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "-k", "configured",
                       "--mayfly-timeout=1").assert_outcomes(passed=1, deselected=1)
    # A wrong URL on the command line beats the ini's right one.
    r = pytester.runpytest("-p", "mayfly.pytest_plugin", "-k", "deletes", "--mayfly-url=http://127.0.0.1:1/v1")
    r.assert_outcomes(errors=1, deselected=1)


def test_delete_idempotent(client):
    # scenario: delete-idempotent
    inbox = client.create_inbox(lifetime_minutes=1)
    assert inbox.delete() is True
    assert inbox.delete() is False  # already deleted: success, no request
    other = client.create_inbox(lifetime_minutes=1)
    _other_holder(client, other).delete()
    assert other.delete() is False  # deleted by another holder: the service's 401 is success
    assert other.gone
    with client.create_inbox(lifetime_minutes=1) as third:
        third.delete()  # the context manager's delete at the end is fine with it


def test_error_names_url(stack, inbox):
    # scenario: error-names-url
    port = stack.http.rsplit(":", 1)[1]
    # A base URL without /v1: the service's 404 (with its hint), named.
    with pytest.raises(mayfly.MayflyError) as e:
        mayfly.Client(f"http://127.0.0.1:{port}").create_inbox(timeout=5)
    text = str(e.value)
    assert e.value.status == 404 and f"POST http://127.0.0.1:{port}/mailboxes" in text, text
    # A call with the inbox's cookies: the URL, never a cookie.
    with pytest.raises(mayfly.MessageNotFoundError) as e:
        inbox.message("00000000-0000-4000-8000-000000000000")
    text = str(e.value)
    assert f"GET {stack.base_url}/messages/00000000-0000-4000-8000-000000000000: 404 MESSAGE_NOT_FOUND" in text, text
    assert "(request " in text
    for c in inbox._core.jar:
        assert c.value not in text and c.value not in repr(e.value)
    # The admin port as the base URL: the service's JSON 404 says it is the
    # admin port and where the API is (its code and details are the stable
    # part); the client names the URL. (An answer without the API's
    # envelope: test_faults' test_an_answer_without_the_envelope_is_not_the_api.)
    with pytest.raises(mayfly.MayflyError) as e:
        mayfly.Client(f"http://{stack.admin}/v1").create_inbox(timeout=5)
    text = str(e.value)
    assert e.value.status == 404 and e.value.code == "ADMIN_ROUTE_NOT_FOUND", text
    assert f"POST http://{stack.admin}/v1/mailboxes: 404 ADMIN_ROUTE_NOT_FOUND: " in text, text
    assert (e.value.details or {}).get("api_prefix") == "/v1", e.value.details
    assert "admin port" in e.value.message and "/v1" in e.value.message, e.value.message
    # No answer at all: the URL and the transport's error.
    with pytest.raises(mayfly.TransportError) as e:
        mayfly.Client("http://127.0.0.1:1/v1", max_attempts=1).create_inbox(timeout=2)
    assert "POST http://127.0.0.1:1/v1/mailboxes" in str(e.value) and "refused" in str(e.value), str(e.value)


def test_wait_timeout_explains(stack, inbox, make_stack, patient_create):
    # scenario: wait-timeout-explains
    with pytest.raises(WaitTimeoutError) as e:
        inbox.wait_for_message(subject="never", timeout=1.5)
    assert "no message arrived" in str(e.value) and stack.base_url in str(e.value), str(e.value)
    stack.send(inbox.address, "Welcome aboard", "hello\n")
    stack.send(inbox.address, "Newsletter", "hello\n")
    with pytest.raises(WaitTimeoutError) as e:
        inbox.wait_for_message(subject="Your code", timeout=4)
    assert '2 messages arrived, none matched (first: "Welcome aboard")' in str(e.value), str(e.value)
    # The server down for less than unreachable_after: the timeout says so.
    s = make_stack()
    c = mayfly.Client(s.base_url)
    down = patient_create(c, lifetime_minutes=1)  # a 503 under load is not this test's subject
    s.stop()
    with pytest.raises(WaitTimeoutError) as e:
        down.wait_for_message(timeout=3)
    text = str(e.value)
    assert not isinstance(e.value, mayfly.UnreachableError)
    assert "the server has been unreachable for" in text and "refused" in text, text


def test_wait_unreachable(make_stack):
    # scenario: wait-unreachable
    s = make_stack()
    c = mayfly.Client(s.base_url)  # unreachable_after: 10 s by default
    inbox = c.create_inbox(lifetime_minutes=1)
    result = {}

    def wait():
        t0 = time.monotonic()
        try:
            inbox.wait_for_message(timeout=60)
        except BaseException as e:  # noqa: B902 - asserted below
            result["err"], result["t"] = e, time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(1.0)  # the wait follows the stream
    s.stop()
    t.join(40)
    err = result.get("err")
    assert isinstance(err, mayfly.UnreachableError), err
    assert isinstance(err, mayfly.TransportError) and isinstance(err, mayfly.MayflyError)
    assert 10.0 <= result["t"] < 20.0, result["t"]  # after 10 s of failures, long before 60 s
    assert 10.0 <= err.unreachable_for < result["t"]
    assert s.base_url in str(err) and "refused" in str(err), str(err)
    # Configurable.
    s.start()
    c2 = mayfly.Client(s.base_url, unreachable_after=2)
    inbox2 = c2.create_inbox(lifetime_minutes=1)
    s.stop()
    t0 = time.monotonic()
    with pytest.raises(mayfly.UnreachableError):
        inbox2.wait_for_message(timeout=30)
    assert time.monotonic() - t0 < 8.0


# Issue 37: tagged addresses, recipients and the shared inbox.


def test_recipient_scoped_wait(stack, inbox, monkeypatch):
    # scenario: recipient-scoped-wait
    a, b = inbox.recipient("a"), inbox.recipient("b")
    assert inbox.address_for("a") == a.address and a.tag == "a" and a.inbox is inbox
    local, _, domain = inbox.address.partition("@")
    assert a.address == f"{local}+a@{domain}"
    stack.send(b.address, "Your code", "Your code is 111111")
    stack.send(inbox.address, "Plain", "to the inbox's own address")
    stack.send(a.address, "Your code", "Your code is 222222")
    got = a.wait_for_message(subject="^Your code$", timeout=15)
    assert mayfly.code(got) == "222222" and got.to == a.address  # never B's, though B's came first
    # Mail to B does not fail an expectation scoped to A.
    threading.Timer(0.5, stack.send, (b.address, "Later", "for b")).start()
    t0 = time.monotonic()
    a.expect_no_message(2)
    assert time.monotonic() - t0 >= 2.0
    # Events scoped to B yield B's mail only. The mail is sent when events()
    # opens its stream (after its first list, which marks its start): a
    # fixed delay races that list on a loaded machine.
    import mayfly._events as events_mod

    real_open = events_mod.open_stream
    sent = threading.Event()

    def open_and_send(core, ctx):
        out = real_open(core, ctx)
        if not sent.is_set():
            sent.set()
            stack.send(a.address, "Event A", "for a")
            stack.send(b.address, "Event B", "for b")
        return out

    monkeypatch.setattr(events_mod, "open_stream", open_and_send)
    events = b.events(timeout=15)
    ev = next(events)
    events.close()
    assert ev.message.subject == "Event B" and ev.message.to == b.address
    # The option to= on the inbox (any case) for B: B's first mail.
    first_b = inbox.wait_for_message(to=b.address.upper(), timeout=15)
    assert mayfly.code(first_b) == "111111" and first_b.to == b.address
    plain = inbox.wait_for_message(subject="^Plain$", timeout=15)
    assert plain.to == inbox.address
    summaries = {s.subject: s.to for s in inbox.messages()}
    assert summaries["Plain"] == inbox.address and summaries["Event A"] == a.address
    # The tag grammar, checked before any request.
    for bad in ("", "a b", "x" * 65, "é", "a+b", "a@b"):
        with pytest.raises(ValueError):
            inbox.address_for(bad)
    with pytest.raises(ValueError):
        inbox.recipient("y" * (64 - len(local)))  # local+tag over 64
    assert inbox.address_for("A.b_c-9")


def test_shared_inbox_fixture(stack, pytester, monkeypatch, client):
    # scenario: shared-inbox-fixture
    # The default fixture in three tests that each get mail at their
    # address: one inbox (one creation) serves them, each test its own
    # tagged address, and the session's end deletes it.
    monkeypatch.setenv("MAYFLY_URL", stack.base_url)
    host, port = stack.smtp.rsplit(":", 1)
    pytester.makeconftest(f"""
        import smtplib, pytest

        @pytest.fixture
        def send():
            def send(to, subject, text):
                with smtplib.SMTP({host!r}, {port}) as s:
                    s.sendmail("app@shop.example", [to], f"Subject: {{subject}}\\r\\n\\r\\n{{text}}\\r\\n")
            return send
        """)
    pytester.makepyfile(test_three="""
        import json, pathlib
        import pytest
        import mayfly

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_gets_its_mail(mayfly_recipient, mayfly_shared_inbox, send, n):
            send(mayfly_recipient.address, "Your code", f"Your code is {n}0000{n}")
            msg = mayfly_recipient.wait_for_message(subject="Your code")
            assert mayfly.code(msg) == f"{n}0000{n}" and msg.to == mayfly_recipient.address
            assert mayfly_recipient.tag.startswith(f"test-gets-its-mail-{n}-")
            with open("seen.jsonl", "a") as f:
                f.write(json.dumps({"address": mayfly_recipient.address, "inbox": mayfly_recipient.inbox.id,
                                    "creations": mayfly_shared_inbox.creations}) + "\\n")
            pathlib.Path("state.json").write_text(json.dumps(mayfly_recipient.inbox.state()))
        """)
    pytester.runpytest("-p", "mayfly.pytest_plugin").assert_outcomes(passed=3)
    import json

    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert len({s["address"] for s in seen}) == 3
    assert len({s["inbox"] for s in seen}) == 1 and [s["creations"] for s in seen] == [1, 1, 1]
    with pytest.raises(mayfly.InboxGoneError):
        client.restore((pytester.path / "state.json").read_text()).current()  # deleted at the session's end


def test_shared_inbox_replaced(client):
    # scenario: shared-inbox-replaced
    now = [datetime.now(timezone.utc)]
    shared = mayfly.SharedInbox(client, clock=lambda: now[0])
    r1 = shared.recipient("Sign up: Alice!")
    first = shared.inbox
    assert r1.inbox is first and shared.creations == 1
    assert __import__("re").fullmatch(r"sign-up-alice-[a-z0-9]{10}", r1.tag), r1.tag
    # Its 60-minute cap within 5 minutes: replaced (one creation, the old one deleted).
    now[0] = first.mailbox.max_expires_at - timedelta(minutes=4)
    r2 = shared.recipient("two")
    second = shared.inbox
    assert second is not first and second.id != first.id and r2.inbox is second
    assert shared.creations == 2 and first.gone
    # Its expiry within 5 minutes (the cap far): extended, no creation.
    exp = second.mailbox.expires_at
    now[0] = exp - timedelta(minutes=4)
    r3 = shared.recipient("three")
    assert shared.inbox is second and r3.inbox is second and shared.creations == 2
    assert second.mailbox.expires_at > exp
    assert second.current().expires_at == second.mailbox.expires_at
    shared.close()
    assert second.gone


def test_creation_limit_explains(make_stack):
    # scenario: creation-limit-explains
    s = make_stack(MAYFLY_RATE_CREATE_PER_MINUTE="1")
    retries = []
    c = mayfly.Client(s.base_url, on_retry=retries.append)
    c.create_inbox(lifetime_minutes=1)
    t0 = time.monotonic()
    with pytest.raises(mayfly.CreationLimitError) as e:
        c.create_inbox(lifetime_minutes=1)
    assert time.monotonic() - t0 < 1.0 and retries == []  # one request, no retry
    text = str(e.value)
    assert e.value.code == "CREATION_RATE_LIMITED" and e.value.retry_after is not None
    assert "this IP's minute of creations is spent" in text, text
    assert f"retry in {e.value.retry_after:g} s" in text, text
    assert "a test suite can share one inbox and give each test its own address" in text, text


def test_wait_for_capacity_is_a_flag(stack, pytester, monkeypatch):
    # --mayfly-wait-for-capacity takes no value: the path after it is not
    # eaten; the environment and the ini option still take 1/true/yes.
    monkeypatch.delenv("MAYFLY_WAIT_FOR_CAPACITY", raising=False)
    pytester.makepyfile(test_flag="""
        import os
        from mayfly.pytest_plugin import _capacity

        def test_flag(request):
            assert _capacity(request.config) is (os.environ.get("WANT") == "1")
        """)
    monkeypatch.setenv("WANT", "1")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "--mayfly-wait-for-capacity", "test_flag.py").assert_outcomes(passed=1)
    monkeypatch.setenv("MAYFLY_WAIT_FOR_CAPACITY", "yes")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "test_flag.py").assert_outcomes(passed=1)
    monkeypatch.setenv("WANT", "0")
    monkeypatch.setenv("MAYFLY_WAIT_FOR_CAPACITY", "no")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "test_flag.py").assert_outcomes(passed=1)
    monkeypatch.delenv("MAYFLY_WAIT_FOR_CAPACITY")
    pytester.makeini("[pytest]\nmayfly_wait_for_capacity = true\n")
    monkeypatch.setenv("WANT", "1")
    pytester.runpytest("-p", "mayfly.pytest_plugin", "test_flag.py").assert_outcomes(passed=1)

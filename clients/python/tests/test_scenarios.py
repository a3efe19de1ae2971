"""The scenarios of clients/SCENARIOS.md against a real stack (conftest.py):
each test names its scenario id in a `scenario:` comment."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

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


def test_parallel_creates(client):
    # scenario: parallel-creates
    # Twelve creations at once: more POST /mailboxes in one second than the
    # request rate (8/s) allows, so creations themselves meet request-rate
    # 429s and are retried (with six, only the selects that follow would).
    retries = []
    c = mayfly.Client(client.base_url, on_retry=retries.append)
    # The request rate counts whole seconds of the node's clock: start the
    # burst early in one, so the twelve POSTs meet one window's limit.
    time.sleep((1.02 - time.time() % 1.0) % 1.0)
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
    inbox.delete()
    sent = []
    orig = client._send
    client._send = lambda *a, **k: sent.append(a) or orig(*a, **k)  # type: ignore[assignment]
    try:
        calls = {
            "delete": lambda: inbox.delete(),
            "current": lambda: inbox.current(),
            "select": lambda: inbox.select(),
            "extend": lambda: inbox.extend(1),
            "list": lambda: inbox.list(),
            "messages": lambda: next(inbox.messages()),
            "message": lambda: inbox.message(msg.id),
            "delete_message": lambda: inbox.delete_message(msg.id),
            "events": lambda: next(inbox.events(timeout=2)),
            "wait_for_message": lambda: inbox.wait_for_message(timeout=2),
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
    for c in inbox._jar:
        jar.set_cookie(copy.copy(c))
    other = mayfly.Inbox(client, jar)
    other._mailbox = inbox.mailbox
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
    for c in inbox._jar:
        jar.set_cookie(copy.copy(c))
    other = mayfly.Inbox(client, jar)
    other._mailbox = inbox.mailbox
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
    for ck in inbox._jar:
        jar.set_cookie(copy.copy(ck))
    other = mayfly.Inbox(client, jar)
    other._mailbox = inbox.mailbox
    inbox._client.poll_interval = 1.0  # below the API's floor: only for this test (the same Client)
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
        inbox._client.poll_interval = mayfly.MIN_POLL_INTERVAL
        inbox.delete()


def test_rate_limit_429_retried(stack, inbox):
    # scenario: rate-limit-429-retried
    retries = []
    inbox._client.on_retry = retries.append
    try:
        with ThreadPoolExecutor(20) as pool:
            pages = list(pool.map(lambda _: inbox.list(limit=5), range(20)))
    finally:
        inbox._client.on_retry = None
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
    assert mayfly.code(msg) in ("2026", "583104")  # the first run of 4-8 digits
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
    cookies = {c.name: c for c in inbox._jar}
    scoped = "mayfly_" + inbox.id.replace("-", "")
    assert set(cookies) == {scoped, "service_session"}
    for c in cookies.values():
        assert c.domain == "127.0.0.1" and not c.domain_specified  # host-only
        assert c.path == "/v1" and not c.secure
    # Another host does not get them; neither does another path.
    import urllib.request

    for url in ("http://127.0.0.2/v1/messages", "http://127.0.0.1/other"):
        req = urllib.request.Request(url)
        inbox._jar.add_cookie_header(req)
        assert req.get_header("Cookie") is None, url
    inbox.delete()
    assert {c.name for c in inbox._jar} == {scoped}  # the session is cleared


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
    with c.create_inbox(lifetime_minutes=1) as inbox, caplog.at_level("DEBUG", logger="mayfly"):
        with pytest.raises(WaitTimeoutError):
            inbox.wait_for_message(timeout=1.5)
    assert not [r for r in caplog.records if "stream" in r.getMessage()], caplog.text


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
        assert got == want, cls.__name__

"""Pure logic: the SSE parser, links() and code(), the backoff, the jar's
rules. No stack needed."""

from __future__ import annotations

import http.cookiejar
import json
import random
import re
import threading
import time
import urllib.request
from datetime import datetime, timezone
from email.message import Message as Headers
from pathlib import Path

import pytest

import mayfly
from mayfly import _retry
from mayfly import client as mc
from mayfly._ctx import Ctx
from mayfly.models import parse_time
from mayfly.sse import SSEEvent, SSEParser


def feed(text: str):
    p = SSEParser()
    out = []
    for line in text.splitlines(keepends=True):
        ev = p.feed(line)
        if ev is not None:
            out.append(ev)
    return out


@pytest.mark.parametrize(
    "stream, want",
    [
        # Mayfly's own shape: retry, then an event with an id.
        ("retry: 3000\n\nevent: message.received\nid: 1\ndata: {\"id\":\"1\"}\n\n",
         [SSEEvent("message.received", '{"id":"1"}', "1")]),
        # A heartbeat comment and a blank line dispatch nothing.
        (": ping\n\n", []),
        # Multi-line data joins with newlines; no event name is "message".
        ("data: a\ndata: b\n\n", [SSEEvent("message", "a\nb")]),
        # CRLF line endings; no space after the colon; a field without a colon.
        ("event:x\r\ndata:1\r\ndata\r\n\r\n", [SSEEvent("x", "1\n")]),
        # Only one leading space is stripped.
        ("data:  two\n\n", [SSEEvent("message", " two")]),
        # An event without data is dropped, and its name does not leak.
        ("event: a\n\ndata: b\n\n", [SSEEvent("message", "b")]),
        # Unknown fields are ignored; an event not ended by a blank line is not dispatched.
        ("foo: bar\ndata: c\n\ndata: d\n", [SSEEvent("message", "c")]),
    ],
)
def test_sse_parser(stream, want):
    assert feed(stream) == want


def msg(text="", html="", subject=""):
    return mayfly.Message(id="m", from_="a@b", subject=subject, received_at=None, status="ready",
                          text_body=text, html_body=html)


# The cases of code(), codes(), links() and links_with_text() are shared
# with the Go and TypeScript clients' unit tests (clients/testdata), so the
# three cannot drift apart.
_TESTDATA = Path(__file__).resolve().parents[2] / "testdata"


def _cases(name):
    cases = json.loads((_TESTDATA / name).read_text(encoding="utf-8"))["cases"]
    assert cases, name
    return [pytest.param(c, id=c["name"]) for c in cases]


def _msg(fields):
    return msg(text=fields.get("text_body", ""), html=fields.get("html_body", ""), subject=fields.get("subject", ""))


@pytest.mark.parametrize("case", _cases("sse.json"))
def test_sse_cases(case):
    """Every case of clients/testdata/sse.json: the chunks as given, then
    the same text one character at a time (every split)."""
    for chunks in (case["chunks"], list("".join(case["chunks"]))):
        p = SSEParser()
        events = [ev for chunk in chunks for ev in p.push(chunk)]
        assert [{"event": e.event, "data": e.data, "id": e.id} for e in events] == case["events"], case["name"]
        assert p.comments == case["comments"], case["name"]
        assert p.retry == case["retry"], case["name"]


@pytest.mark.parametrize("case", _cases("codes.json"))
def test_helper_code_table(case):
    m = _msg(case["message"])
    assert mayfly.code(m, case.get("pattern")) == case["code"]
    if "pattern" not in case:
        assert mayfly.codes(m) == case["codes"]


@pytest.mark.parametrize("case", _cases("links.json"))
def test_helper_links_table(case):
    m = _msg(case["message"])
    assert [tuple(link) for link in mayfly.links_with_text(m)] == [(l["url"], l["text"]) for l in case["links_with_text"]]
    assert mayfly.links(m) == [l["url"] for l in case["links_with_text"]]


def test_helper_code_compiled_pattern_and_link_fields():
    # A compiled pattern works as a string one; a Link has url and text.
    assert mayfly.code(msg(text="token XY9"), re.compile(r"token (\w+)")) == "XY9"
    link = mayfly.links_with_text(msg(html='<a href="https://a.example/">Verify</a>'))[0]
    assert (link.url, link.text) == ("https://a.example/", "Verify")


def test_parse_time():
    assert parse_time("2026-11-21T18:03:18.930Z") == datetime(2026, 11, 21, 18, 3, 18, 930000, tzinfo=timezone.utc)
    assert parse_time("2026-11-21T18:03:18Z") == datetime(2026, 11, 21, 18, 3, 18, tzinfo=timezone.utc)
    assert parse_time("2026-11-21T18:03:18.1+00:00").microsecond == 100000
    assert parse_time(None) is None


def test_backoff_full_jitter_capped():
    for attempt in range(1, 40):
        ceiling = min(5.0, 0.2 * 2 ** (attempt - 1))
        for _ in range(20):
            assert 0 <= mc._backoff(attempt) <= ceiling


def test_retry_after():
    assert mc._retry_after("1") == 1.0
    assert mc._retry_after(" 0 ") == 0.0
    assert mc._retry_after(None) is None
    assert mc._retry_after("soon") is None
    assert mc._retry_after("1.5") is None
    # Not a whole number of seconds: as if absent (SCENARIOS.md, Retries).
    assert mc._retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))) is None


@pytest.mark.parametrize("case", _cases("retry.json"))
def test_retry_rules(case):
    """Every case of clients/testdata/retry.json against the pure retry
    function, with the jitter drawn at both ends of its range."""
    pol = json.loads((_TESTDATA / "retry.json").read_text(encoding="utf-8"))["policy"]
    policy = _retry.Policy(base=pol["base_ms"] / 1000, cap=pol["cap_ms"] / 1000, max_attempts=pol["max_attempts"],
                           max_retry_after=pol["max_retry_after_s"], jitter=pol["jitter_ms"] / 1000)
    assert policy == _retry.Policy()  # the client's defaults are the table's
    rem = case.get("remaining_ms")
    for rand in (lambda a, b: a, lambda a, b: b, random.uniform):
        wait = _retry.decide(
            case["kind"], case["attempt"], status=case.get("status", 0), code=case.get("code") or "",
            retry_after=_retry.parse_retry_after(case.get("retry_after")), transport=case.get("transport", ""),
            remaining=None if rem is None else rem / 1000, policy=policy, rand=rand,
        )
        if case["want"] == "give_up":
            assert wait is None, case["name"]
        else:
            lo, hi = case["wait_ms"]
            assert wait is not None, case["name"]
            assert lo <= round(wait * 1000, 6) <= hi, (case["name"], wait)


def test_ctx_sleep_and_cancel():
    c = Ctx(0.3, None)
    t0 = time.monotonic()
    assert c.sleep(1.0) is False and time.monotonic() - t0 < 0.1  # would pass the deadline: at once
    assert c.sleep(1.0, clamp=True) is False and 0.25 <= time.monotonic() - t0 < 0.8
    ev = threading.Event()
    threading.Timer(0.1, ev.set).start()
    c = Ctx(None, ev)
    t0 = time.monotonic()
    with pytest.raises(mayfly.CancelledError):
        c.sleep(5)
    assert time.monotonic() - t0 < 0.5


class _Resp:
    def __init__(self, *set_cookies):
        self.h = Headers()
        for v in set_cookies:
            self.h["Set-Cookie"] = v

    def info(self):
        return self.h


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "mayfly.example"])
def test_cookiejar_host_only_over_http(host):
    # What the service sends (fasthttp's shape), on plain http without Secure.
    jar = mc.new_jar()
    base = f"http://{host}:8080/v1"
    req = urllib.request.Request(base + "/mailboxes", method="POST")
    jar.extract_cookies(_Resp(
        "mayfly_0123=abc.def; expires=Wed, 01 Jan 2100 00:00:00 GMT; path=/v1; HttpOnly; SameSite=Lax",
        "service_session=s.e; expires=Wed, 01 Jan 2100 00:00:00 GMT; path=/v1; HttpOnly; SameSite=Lax",
    ), req)
    def sent(url):
        r = urllib.request.Request(url)
        jar.add_cookie_header(r)
        return r.get_header("Cookie") or ""

    assert "service_session=s.e" in sent(base + "/messages")
    assert "mayfly_0123=abc.def" in sent(base + "/mailboxes/x/select")
    assert sent(f"http://{host}:8080/other") == ""  # Path=/v1
    assert sent("http://127.0.0.2:8080/v1/messages") == ""  # host-only
    if host[0].isalpha():
        # http.cookiejar's default policy would send it here (a quirk).
        assert sent(f"http://sub.{host}:8080/v1/messages") == ""
    # Max-Age=0 clears (DELETE /mailboxes/current).
    jar.extract_cookies(_Resp("service_session=; max-age=0; path=/v1; HttpOnly"), req)
    assert "service_session" not in sent(base + "/messages")


def test_default_cookiejar_quirk_is_real():
    # Why new_jar() sets a policy: the default one sends a host-only cookie
    # to subdomains.
    jar = http.cookiejar.CookieJar()
    jar.extract_cookies(_Resp("s=1; path=/v1"), urllib.request.Request("http://mayfly.example/v1/x"))
    r = urllib.request.Request("http://sub.mayfly.example/v1/x")
    jar.add_cookie_header(r)
    assert r.get_header("Cookie") == "s=1"


def test_secure_cookie_is_not_sent_over_http():
    jar = mc.new_jar()
    req = urllib.request.Request("http://127.0.0.1:8080/v1/mailboxes", method="POST")
    jar.extract_cookies(_Resp("service_session=s; path=/v1; Secure; HttpOnly"), req)
    r = urllib.request.Request("http://127.0.0.1:8080/v1/messages")
    jar.add_cookie_header(r)
    assert r.get_header("Cookie") is None
    r = urllib.request.Request("https://127.0.0.1:8080/v1/messages")
    jar.add_cookie_header(r)
    assert r.get_header("Cookie") == "service_session=s"


def test_client_rejects_bad_base_url():
    with pytest.raises(ValueError):
        mayfly.Client("ftp://x/v1")
    assert mayfly.Client("http://127.0.0.1:1/v1/").base_url == "http://127.0.0.1:1/v1"


def test_error_str_has_no_cookie():
    e = mayfly.MayflyError("Too many requests", status=429, code="RATE_LIMITED", request_id="r1", retry_after=1.0)
    assert str(e) == "mayfly: 429 RATE_LIMITED: Too many requests (request r1)"
    e = mayfly.MayflyError("Too many requests", status=429, code="RATE_LIMITED", request_id="r1",
                           method="GET", url="http://h/v1/messages?limit=5")
    assert str(e) == "mayfly: GET http://h/v1/messages?limit=5: 429 RATE_LIMITED: Too many requests (request r1)"


def test_error_kinds():
    # gone-is-session-invalid (unit): the class hierarchy of the contract.
    assert issubclass(mayfly.InboxGoneError, mayfly.SessionInvalidError)
    assert issubclass(mayfly.MessageNotFoundError, mayfly.MayflyError)
    assert not issubclass(mayfly.MessageNotFoundError, ValueError)
    assert issubclass(mayfly.UnreachableError, mayfly.TransportError)
    assert issubclass(mayfly.UnexpectedMessageError, mayfly.MayflyError)
    assert mayfly.Client("http://h/v1").wait_timeout == 20.0 == mayfly.DEFAULT_WAIT_TIMEOUT
    assert isinstance(mayfly.WaitTimeoutError("x"), TimeoutError)


def test_state_mailbox_times_null_when_none():
    # A mailbox time the service gave none of is null in a state, as the Go
    # and TypeScript clients write it (clients/SCENARIOS.md, "Save and
    # restore"); a given one is RFC 3339.
    base = "http://127.0.0.1:1/v1"
    st = {"version": 1, "base": base, "cookies": [], "seen": [],
          "mailbox": {"id": "m1", "address": "a@mayfly.test", "kind": "permanent",
                      "expires_at": None, "max_expires_at": None}}
    inbox = mayfly.Client(base).restore(st)
    got = inbox.state()["mailbox"]
    assert got["expires_at"] is None and got["max_expires_at"] is None, got
    st["mailbox"]["expires_at"] = "2026-11-25T09:00:00Z"
    assert mayfly.Client(base).restore(st).state()["mailbox"]["expires_at"] == "2026-11-25T09:00:00Z"


def test_address_for_and_the_tag_grammar():
    from mayfly._recipient import address_for

    assert address_for("abc@mayfly.test", "A.b_c-9") == "abc+A.b_c-9@mayfly.test"
    assert address_for("a" * 32 + "@d.test", "t" * 31) == "a" * 32 + "+" + "t" * 31 + "@d.test"  # 64
    for bad in ("", " ", "a b", "a+b", "a@b", "é", "x" * 65, None):
        with pytest.raises(ValueError):
            address_for("abc@mayfly.test", bad)
    with pytest.raises(ValueError):
        address_for("a" * 32 + "@d.test", "t" * 32)  # local+tag: 65


def test_shared_inbox_tags():
    from mayfly._shared import safe_tag

    tags = {safe_tag("test_signup[17]", 40) for _ in range(50)}
    assert len(tags) == 50  # never repeated
    for t in tags:
        assert re.fullmatch(r"test-signup-17-[a-z0-9]{10}", t), t
    long = safe_tag("x" * 100, 31)
    assert len(long) <= 31 and re.fullmatch(r"x{20}-[a-z0-9]{10}", long), long
    assert re.fullmatch(r"[a-z0-9]{10}", safe_tag("!!!", 40))
    assert re.fullmatch(r"aa-b-[a-z0-9]{10}", safe_tag("AA  b", 40))

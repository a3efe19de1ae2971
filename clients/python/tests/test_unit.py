"""Pure logic: the SSE parser, links() and code(), the backoff, the jar's
rules. No stack needed."""

from __future__ import annotations

import http.cookiejar
import threading
import time
import urllib.request
from datetime import datetime, timezone
from email.message import Message as Headers

import pytest

import mayfly
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


def test_links():
    m = msg(
        text="Open https://a.example/x?y=1&amp;z=2. Or (see http://b.example/p(1)) and https://a.example/x?y=1&z=2",
        html='<a href="https://c.example/?q=1&amp;r=2">c</a><a href="mailto:x@y">m</a>'
             '<a HREF=" HTTPS://d.example/ ">d</a><a href="javascript:alert(1)">j</a>'
             '<a href="https://b.example/p(1)">dup</a>',
    )
    assert mayfly.links(m) == [
        "https://a.example/x?y=1&z=2",
        "http://b.example/p(1)",
        "https://c.example/?q=1&r=2",
        "HTTPS://d.example/",
        "https://b.example/p(1)",
    ]
    assert mayfly.links(msg()) == []


def test_links_with_text():
    # links-with-text (unit): the anchor's text for an href, "" for a text
    # link; the same order and each URL once, as links().
    m = msg(
        text="Start at https://a.example/start.",
        html='<p><a href="https://a.example/verify?u=1&amp;t=2">  Verify\n <b>my</b> email </a></p>'
             '<a href="https://a.example/start">again</a><a href="https://a.example/x"></a>',
    )
    assert mayfly.links_with_text(m) == [
        ("https://a.example/start", ""),
        ("https://a.example/verify?u=1&t=2", "Verify my email"),
        ("https://a.example/x", ""),
    ]
    assert [link.url for link in mayfly.links_with_text(m)] == mayfly.links(m)
    assert mayfly.links_with_text(m)[1].text == "Verify my email"


def test_links_unescape_an_href_once():
    # The HTML parser unescapes attribute values: "&amp;amp;" is the text
    # "&amp;" in the URL, and must stay so (it was unescaped twice to "&").
    m = msg(html='<a href="https://a.example/?q=x&amp;amp;y=1">x</a>')
    assert mayfly.links(m) == ["https://a.example/?q=x&amp;y=1"]


def test_code():
    assert mayfly.code(msg(text="Your code: 123456.")) == "123456"
    # 3 or 9 digits are not a code; word boundaries hold.
    assert mayfly.code(msg(text="id 123 and 123456789 and abc12345")) is None
    # The text body first, then the HTML's text, then the subject.
    assert mayfly.code(msg(text="1111", html="<b>2222</b>", subject="3333")) == "1111"
    assert mayfly.code(msg(html="<p>Code</p><p>2222</p><script>9999</script>", subject="3333")) == "2222"
    # Cells stay apart: tags count as spaces.
    assert mayfly.code(msg(html="<td>2026</td><td>1234</td>")) == "2026"
    assert mayfly.code(msg(html="<p>&#x31;&#50;34</p>")) == "1234"
    assert mayfly.code(msg(subject="Your code is 3333")) == "3333"
    # A pattern with a group gives group 1; a compiled pattern works too.
    import re

    assert mayfly.code(msg(text="code: AB-12 ref 9999"), r"code: ([A-Z]+-\d+)") == "AB-12"
    assert mayfly.code(msg(text="token XY9"), re.compile(r"token (\w+)")) == "XY9"
    assert mayfly.code(msg(text="nothing"), r"(\d+)") is None


def test_code_prefers_keyword():
    # code-prefers-keyword (unit): a run near a keyword, else the last
    # 6-digit run, else the first run of 4 to 8 digits.
    assert mayfly.code(msg(text="Order #2026 placed 2026-11-24. Your verification code is 482913")) == "482913"
    assert mayfly.code(msg(text="482913 is your code. Order 2026")) == "482913"
    assert mayfly.code(msg(text="Your PIN: 9876. Order 123456")) == "9876"
    assert mayfly.code(msg(text="Your one-time passcode:\n\n  55512")) == "55512"
    assert mayfly.code(msg(text="Use 31337 as your OTP")) == "31337"
    assert mayfly.code(msg(text="In 2026 refs 123456 and 654321")) == "654321"
    assert mayfly.code(msg(text="Year 2026 ref 12345")) == "2026"
    # The keyword rule over every place first: the subject's keyword beats
    # the body's year.
    assert mayfly.code(msg(text="Thanks for your order of 2026", subject="Your code 4821")) == "4821"
    # A custom pattern keeps the first match.
    assert mayfly.code(msg(text="2026 code 482913"), r"\d{4}") == "2026"


def test_codes():
    m = msg(text="Order #2026 placed 2026-11-24 code 482913 (ref 123456789)", subject="9999")
    assert mayfly.codes(m) == ["2026", "2026", "482913"]
    assert mayfly.codes(msg(html="<p>1111</p><p>2222</p>", subject="3333")) == ["1111", "2222"]
    assert mayfly.codes(msg(subject="no digits")) == []


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
    assert mc._retry_after(None) is None
    assert mc._retry_after("soon") is None
    assert 0 < mc._retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))) <= 30


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

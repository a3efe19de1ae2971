"""The public-limits suite (issue 37): 200 tests of a signup flow that run,
twice in a row from one IP, against a Mayfly with the service's own limits
(the public spec's: 5 creations a minute, 10 an hour, 20 a day, 5 active
inboxes, 8 requests a second per IP; 60 SMTP connections and 120 messages
a minute per IP). Each test uses only the default fixture, mayfly_recipient:
a tagged address of its own on the session's one shared inbox, so a run
spends one creation.

Run (from the repository's root, against a stack of `bin/mayfly all` with
nothing but its addresses, Redis and MAYFLY_COOKIE_SECURE=false set):

    MAYFLY_URL=http://127.0.0.1:8080/v1 MAYFLY_SUITE_SMTP=127.0.0.1:2525 \\
      PYTHONPATH=clients/python /usr/bin/python3 -m pytest -p mayfly.pytest_plugin \\
      -p no:cacheprovider -q clients/python/suite --junitxml=report.xml

MAYFLY_SUITE_TESTS sets the number of tests (default 200).

The app under test is here: a tiny signup app (http.server in a thread of
the test process). POST /signup mails, over SMTP to $MAYFLY_SUITE_SMTP, a
text+HTML message with a 6-digit code and a "Verify your email" link; POST
/verify-code takes the code, GET /verify?token= the link, and the second of
the two says "Email verified". Like a real app it sends over one SMTP
connection and, refused by the per-IP SMTP rate (421), waits for the next
minute's window and sends again."""

from __future__ import annotations

import html
import json
import os
import secrets
import smtplib
import threading
import time
import urllib.parse
import urllib.request
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional

import pytest

SUBJECT = "Verify your email"


class Mailer:
    """One SMTP connection, kept open; a refusal of the per-IP rate (421,
    or the connection closed after it) waits for the next minute."""

    def __init__(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        self.host, self.port = host, int(port)
        self.lock = threading.Lock()
        self.conn: Optional[smtplib.SMTP] = None
        self.sent = 0
        self.deferred = 0

    def send(self, m: EmailMessage) -> None:
        with self.lock:
            for attempt in range(4):
                try:
                    if self.conn is None:
                        self.conn = smtplib.SMTP(self.host, self.port, timeout=30)
                    self.conn.send_message(m)
                    self.sent += 1
                    return
                except (smtplib.SMTPServerDisconnected, smtplib.SMTPResponseException, OSError) as e:
                    self._drop()
                    code = getattr(e, "smtp_code", 0)
                    if attempt == 3 or code >= 500:
                        raise
                    self.deferred += 1
                    # 421: the per-IP SMTP rate, whose windows are whole
                    # clock minutes; anything else: a moment.
                    time.sleep(60.5 - time.time() % 60 if code == 421 else 1.0)

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = None

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                try:
                    self.conn.quit()
                except (smtplib.SMTPException, OSError):
                    pass
            self.conn = None


class SignupApp:
    """The app under test; ``url`` is its base."""

    def __init__(self, mailer: Mailer) -> None:
        self.mailer = mailer
        self.users: Dict[str, Dict[str, Any]] = {}
        self.lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _answer(self, status: int, body: str, ctype: str = "application/json") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                form = json.loads(self.rfile.read(n) or b"{}")
                if self.path == "/signup":
                    app.sign_up(str(form["email"]))
                    self._answer(201, json.dumps({"ok": True}))
                elif self.path == "/verify-code":
                    ok = app.verify_code(str(form["email"]), str(form["code"]))
                    self._answer(200 if ok else 400, json.dumps({"ok": ok}))
                else:
                    self._answer(404, "{}")

            def do_GET(self) -> None:
                u = urllib.parse.urlsplit(self.path)
                if u.path != "/verify":
                    return self._answer(404, "{}")
                token = urllib.parse.parse_qs(u.query).get("token", [""])[0]
                self._answer(200, app.verify_link(token), "text/html; charset=utf-8")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def sign_up(self, email: str) -> None:
        code = f"{secrets.randbelow(900000) + 100000}"
        token = secrets.token_urlsafe(16)
        with self.lock:
            self.users[email] = {"code": code, "token": token, "code_ok": False, "link_ok": False}
        link = f"{self.url}/verify?token={token}&src=mail"
        m = EmailMessage()
        m["From"] = "Signup app <no-reply@app.example>"
        m["To"] = email
        m["Subject"] = SUBJECT
        m.set_content(f"Welcome!\n\nYour verification code is {code}.\n\n{SUBJECT}: {link}\n")
        m.add_alternative(
            f"<p>Welcome!</p><p>Your verification code is <b>{code}</b>.</p>"
            f'<p><a href="{html.escape(link)}">{SUBJECT}</a></p>', subtype="html")
        self.mailer.send(m)

    def verify_code(self, email: str, code: str) -> bool:
        with self.lock:
            u = self.users.get(email)
            if u is None or u["code"] != code:
                return False
            u["code_ok"] = True
            return True

    def verify_link(self, token: str) -> str:
        with self.lock:
            for u in self.users.values():
                if u["token"] == token:
                    u["link_ok"] = True
                    return "<p>Email verified</p>" if u["code_ok"] else "<p>Enter your code</p>"
        return "<p>Unknown link</p>"

    def post(self, path: str, form: Dict[str, str]) -> Dict[str, Any]:
        req = urllib.request.Request(self.url + path, data=json.dumps(form).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=150) as r:
            return json.loads(r.read())

    def get(self, url: str) -> str:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read().decode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.mailer.close()


_RUN: Dict[str, Any] = {}


@pytest.fixture(scope="session")
def app(mayfly_shared_inbox):
    addr = os.environ.get("MAYFLY_SUITE_SMTP", "")
    if not addr:
        pytest.fail("MAYFLY_SUITE_SMTP (host:port of Mayfly's SMTP) is not set", pytrace=False)
    a = SignupApp(Mailer(addr))
    _RUN.update(app=a, shared=mayfly_shared_inbox, t0=time.monotonic())
    yield a
    a.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if "app" in _RUN:
        terminalreporter.write_line(
            f"mayfly suite: {_RUN['shared'].creations} inbox(es) created, {_RUN['app'].mailer.sent} mails sent "
            f"({_RUN['app'].mailer.deferred} deferred by the SMTP rate), "
            f"{time.monotonic() - _RUN['t0']:.1f}s from the first test")

"""The stack the suite runs against (clients/SCENARIOS.md, "The stack"): its
own `bin/mayfly all` on free loopback ports, against the Redis Cluster of
MAYFLY_TEST_REDIS_ADDRS (started by `make test`), with its own key prefix,
cookies without Secure, the spec's request rate (8/s) and creation limits
that allow the suite's inboxes. No Redis is a failure, never a skip."""

from __future__ import annotations

import os
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from email.message import EmailMessage
from pathlib import Path
from typing import Dict, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
REPO = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE))  # the package of this clone, installed or not

pytest_plugins = ["pytester"]


def _free_ports(n: int) -> List[int]:
    """n distinct free loopback ports: each socket stays bound until all are
    picked (one closed before the next bind could be picked again)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Stack:
    """`mayfly all` as a subprocess; stop() and start() keep its ports."""

    def __init__(self, binary: Path, redis_addrs: str, workdir: Path, **env: str) -> None:
        self.binary = binary
        http, smtp, admin = _free_ports(3)
        self.http = f"127.0.0.1:{http}"
        self.smtp = f"127.0.0.1:{smtp}"
        self.admin = f"127.0.0.1:{admin}"
        self.prefix = f"pyclient-{uuid.uuid4().hex[:12]}"
        self.base_url = f"http://{self.http}/v1"
        self.log_path = workdir / "mayfly.log"
        self.env: Dict[str, str] = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "MAYFLY_REDIS_ADDRS": redis_addrs,
            "MAYFLY_REDIS_PREFIX": self.prefix,
            "MAYFLY_HTTP_ADDR": self.http,
            "MAYFLY_SMTP_ADDR": self.smtp,
            "MAYFLY_ADMIN_ADDR": self.admin,
            "MAYFLY_COOKIE_SECURE": "false",
            "MAYFLY_DOMAINS": "mayfly.test",
            "MAYFLY_RATE_REQUESTS_PER_SECOND": "8",
            "MAYFLY_RATE_CREATE_PER_MINUTE": "1000",
            "MAYFLY_RATE_CREATE_PER_HOUR": "1000",
            "MAYFLY_RATE_CREATE_PER_DAY": "1000",
            "MAYFLY_RATE_ACTIVE_PER_IP": "1000",
            "MAYFLY_SHUTDOWN_TIMEOUT": "2s",
            "MAYFLY_DRAIN_DELAY": "0s",  # no load balancer to drain from: stop at once
            "MAYFLY_LOG_LEVEL": "warn",
        }
        self.env.update(env)
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 20.0) -> None:
        assert self.proc is None
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(self.binary), "all"], env=self.env, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mayfly exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(f"http://{self.admin}/readyz", timeout=1) as r:
                    if r.status == 200 and self._api_up():
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mayfly not ready within {timeout}s:\n{self.logs()}")

    def _api_up(self) -> bool:
        try:
            socket.create_connection(tuple_addr(self.http), timeout=1).close()
            socket.create_connection(tuple_addr(self.smtp), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def send(self, to: str, subject: str, text: Optional[str] = None, html: Optional[str] = None,
             sender: str = "Shop <no-reply@shop.example>") -> None:
        """One message over SMTP (smtplib)."""
        m = EmailMessage()
        m["From"] = sender
        m["To"] = to
        m["Subject"] = subject
        m["Message-ID"] = f"<{uuid.uuid4()}@shop.example>"
        if text is not None:
            m.set_content(text)
            if html is not None:
                m.add_alternative(html, subtype="html")
        elif html is not None:
            m.set_content(html, subtype="html")
        host, port = tuple_addr(self.smtp)
        with smtplib.SMTP(host, port, timeout=10) as s:
            s.send_message(m)

    def send_raw(self, to: str, raw: bytes, sender: str = "eve@example.org") -> None:
        """Raw bytes as one message over SMTP (smtplib)."""
        host, port = tuple_addr(self.smtp)
        with smtplib.SMTP(host, port, timeout=10) as s:
            s.sendmail(sender, [to], raw)


def tuple_addr(a: str):
    host, _, port = a.rpartition(":")
    return host, int(port)


def redis_addrs() -> str:
    addrs = ",".join(a.strip() for a in os.environ.get("MAYFLY_TEST_REDIS_ADDRS", "").split(",") if a.strip())
    if not addrs:
        pytest.fail(
            "MAYFLY_TEST_REDIS_ADDRS is not set: run the suite with `make test`, or start a cluster with "
            "`make cluster-up` and set MAYFLY_TEST_REDIS_ADDRS=$(deploy/cluster.sh addrs)",
            pytrace=False,
        )
    return addrs


def mayfly_binary() -> Path:
    b = Path(os.environ.get("MAYFLY_BIN", str(REPO / "bin" / "mayfly")))
    if not b.is_file():
        pytest.fail(f"{b} is missing: run `make build` first", pytrace=False)
    return b


@pytest.fixture(scope="session")
def stack():
    addrs = redis_addrs()
    binary = mayfly_binary()
    with tempfile.TemporaryDirectory(prefix="mayfly-pyclient-") as d:
        s = Stack(binary, addrs, Path(d))
        s.start()
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture
def make_stack(tmp_path):
    """Starts a stack of its own (settings overridden by keyword, e.g.
    MAYFLY_RATE_ACTIVE_PER_IP="2"): for the tests that stop it or need other
    limits than the session's stack. Stopped after the test."""
    started = []

    def make(**env: str) -> Stack:
        s = Stack(mayfly_binary(), redis_addrs(), tmp_path, **env)
        s.start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def client(stack):
    import mayfly

    return mayfly.Client(stack.base_url, wait_timeout=20)


def create_inbox_patiently(client, deadline: float = 30.0, **kw):
    """client.create_inbox(**kw), tried again on a 503 for up to deadline
    seconds: the set-up of a test whose subject is not creation. The client
    retries a 503 REQUEST_PROTECTION itself, but never a creation that may
    have happened (503 DEPENDENCY_UNAVAILABLE: a Redis Cluster slowed by a
    loaded machine); a test that only needs an inbox may create another."""
    import mayfly

    end = time.monotonic() + deadline
    while True:
        try:
            return client.create_inbox(**kw)
        except mayfly.MayflyError as e:
            if e.status != 503 or time.monotonic() + 1.0 > end:
                raise
            time.sleep(1.0)


@pytest.fixture
def patient_create():
    """create_inbox_patiently, for a test that makes its own client."""
    return create_inbox_patiently


@pytest.fixture
def inbox(client):
    ib = create_inbox_patiently(client, lifetime_minutes=5)
    yield ib
    if not ib.gone:
        ib.delete()


def pytest_collection_modifyitems(config, items: List[pytest.Item]) -> None:
    # An empty run would exit 5 and could pass for a success upstream.
    if not items and not config.getoption("collectonly"):
        raise pytest.UsageError("no tests collected")

"""The package as users get it: the pytest plugin's fixture, and the one
documented install command (README.md) in fresh virtual environments: a
plain one (offline, and with an index) and one with Debian's pytest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent

SIGNUP_TEST = textwrap.dedent(
    """
    import re
    import mayfly

    def test_signup(mayfly_inbox, send_code):
        send_code(mayfly_inbox.address)
        msg = mayfly_inbox.wait_for_message(subject=re.compile("^Your code"), timeout=15)
        assert mayfly.code(msg) == "246810"
        test_signup.inbox = mayfly_inbox

    def test_deleted_after_the_test():
        try:
            test_signup.inbox.list()
        except mayfly.InboxGoneError:
            return
        raise AssertionError("the fixture's inbox outlived its test")
    """
)


def send_code_conftest(stack) -> str:
    host, port = stack.smtp.rsplit(":", 1)
    return textwrap.dedent(
        f"""
        import smtplib
        import pytest

        @pytest.fixture
        def send_code():
            def send(to):
                with smtplib.SMTP({host!r}, {port}) as s:
                    s.sendmail("shop@example.com", [to], "Subject: Your code\\r\\n\\r\\nYour code is 246810\\r\\n")
            return send
        """
    )


def test_pytest_plugin_from_a_clone(stack, pytester):
    # signup-flow through the fixture, loaded with -p from the clone.
    pytester.makeconftest(send_code_conftest(stack))
    pytester.makepyfile(test_signup=SIGNUP_TEST)
    r = pytester.runpytest("-p", "mayfly.pytest_plugin", f"--mayfly-url={stack.base_url}")
    r.assert_outcomes(passed=2)


def test_pytest_plugin_url_from_the_environment(stack, pytester, monkeypatch):
    monkeypatch.setenv("MAYFLY_URL", stack.base_url)
    pytester.makepyfile(
        """
        def test_url(mayfly_url, mayfly_inbox):
            assert mayfly_inbox.address.endswith("@mayfly.test")
        """
    )
    pytester.runpytest("-p", "mayfly.pytest_plugin").assert_outcomes(passed=1)


def _clone_copy(tmp_path: Path) -> Path:
    """clients/python as a clone has it (without the tests)."""
    src = tmp_path / "clients" / "python"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "examples", "__pycache__", "build",
                                                                "*.egg-info"))
    return src


def _venv(tmp_path: Path, name: str, *flags: str) -> str:
    venv = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", *flags, str(venv)], check=True)
    return str(venv / "bin" / "python")


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}


def test_install_in_a_plain_venv_offline_and_with_an_index(tmp_path):
    # README: python3 -m pip install ./clients/python — in a plain venv (no
    # system packages: no wheel, maybe no setuptools), no flags. The build
    # backend is in the tree and needs nothing, so it works offline
    # (PIP_NO_INDEX: this part is real) and with an index, which it never
    # asks: the index here is a local server that records what pip asks
    # (simulated: this machine reaches no public index).
    import http.server
    import threading

    _clone_copy(tmp_path)
    py = _venv(tmp_path, "plain")
    env = _clean_env()
    # Not even setuptools (Python 3.12's venvs have none): nothing to build with.
    subprocess.run([py, "-m", "pip", "uninstall", "-q", "-y", "setuptools", "wheel"], env=env,
                   capture_output=True, timeout=120)
    r = subprocess.run([py, "-c", "import setuptools"], env=env, capture_output=True)
    assert r.returncode != 0, "setuptools is still in the plain venv: the test would prove nothing"
    r = subprocess.run([py, "-c", "import wheel"], env=env, capture_output=True)
    assert r.returncode != 0, "wheel is in the plain venv: the test would prove nothing"
    offline = dict(env, PIP_NO_INDEX="1")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "./clients/python"], cwd=tmp_path, env=offline,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([py, "-c", "import mayfly, importlib.metadata as m; print(mayfly.__file__); "
                                  "print([e.value for e in m.entry_points(group='pytest11')])"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert str(tmp_path / "plain") in r.stdout and "mayfly.pytest_plugin" in r.stdout, r.stdout

    asked = []

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        online = dict(env, PIP_INDEX_URL=f"http://127.0.0.1:{srv.server_address[1]}/simple/")
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--force-reinstall", "./clients/python"],
                           cwd=tmp_path, env=online, capture_output=True, text=True, timeout=120)
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert asked == [], asked  # nothing to fetch to build or install it


def test_wheel_is_reproducible_and_its_record_right(tmp_path):
    import base64
    import hashlib
    import zipfile

    sys.path.insert(0, str(PACKAGE / "_build"))
    try:
        import mayfly_build
    finally:
        sys.path.pop(0)
    a = mayfly_build.build_wheel(str(tmp_path / "a"))
    b = mayfly_build.build_wheel(str(tmp_path / "b"))
    assert a == b == "mayfly_client-0.1.0-py3-none-any.whl"
    assert (tmp_path / "a" / a).read_bytes() == (tmp_path / "b" / b).read_bytes()
    with zipfile.ZipFile(tmp_path / "a" / a) as z:
        names = set(z.namelist())
        assert {"mayfly/__init__.py", "mayfly/py.typed", "mayfly/pytest_plugin.py"} <= names
        info = "mayfly_client-0.1.0.dist-info/"
        record = z.read(info + "RECORD").decode().splitlines()
        assert len(record) == len(names)
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if path == info + "RECORD":
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == ("sha256=" + want, len(data)), path
        assert z.read(info + "entry_points.txt").decode() == "[pytest11]\nmayfly = mayfly.pytest_plugin\n"
        import mayfly

        assert f"Version: {mayfly.__version__}" in z.read(info + "METADATA").decode()


def test_install_from_a_clone(stack, tmp_path):
    # The offline path with Debian's pytest (python3-pytest): a venv that
    # sees the system's packages, the same install line (no flags, no
    # index), then `python3 -m pytest` — the venv's python, so the plugin is
    # found by its entry point (a bare `pytest` would be /usr/bin/pytest,
    # outside the venv).
    _clone_copy(tmp_path)
    py = _venv(tmp_path, "venv", "--system-site-packages")
    env = _clean_env()
    env["PIP_NO_INDEX"] = "1"  # proves it needs no package index
    r = subprocess.run(
        [py, "-m", "pip", "install", "-q", "./clients/python"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    work = tmp_path / "project"
    work.mkdir()
    (work / "conftest.py").write_text(send_code_conftest(stack))
    (work / "test_signup.py").write_text(SIGNUP_TEST)
    env["MAYFLY_URL"] = stack.base_url
    r = subprocess.run(
        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout
    # The module came from the venv, not from the clone.
    r = subprocess.run([py, "-c", "import mayfly; print(mayfly.__file__)"], cwd=work, env=env,
                       capture_output=True, text=True, check=True)
    assert str(tmp_path / "venv") in r.stdout


def readme_signup_test() -> str:
    """The minimal test of README.md ("create, sign up, wait, get the
    code"), as written."""
    import re

    text = (PACKAGE / "README.md").read_text()
    m = re.search(r"```python\n(# test_signup\.py.*?)```", text, re.S)
    assert m, "README.md lost its minimal test"
    return m.group(1)


def test_readme_signup_test_passes_as_written(stack, pytester, monkeypatch):
    # The README's minimal test, changed only where make run's ports are
    # this stack's (the URL through $MAYFLY_URL, as a user's CI would).
    code = readme_signup_test()
    host, port = stack.smtp.rsplit(":", 1)
    assert code.count('"127.0.0.1", 2525') == 1
    monkeypatch.setenv("MAYFLY_URL", stack.base_url)
    pytester.makepyfile(test_signup=code.replace('"127.0.0.1", 2525', f"{host!r}, {port}"))
    pytester.runpytest("-p", "mayfly.pytest_plugin").assert_outcomes(passed=1)
    lines = [line for line in code.splitlines() if line.strip()]
    assert len(lines) <= 12, len(lines)  # short enough to copy

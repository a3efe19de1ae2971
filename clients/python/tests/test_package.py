"""The package as users get it: the pytest plugin's fixture, and the one
documented install command (README.md) in a fresh virtual environment."""

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


def test_install_from_a_clone(stack, tmp_path):
    # README: python3 -m pip install --no-build-isolation ./clients/python
    # (offline: no build dependency is fetched), here into a venv that sees
    # the system's pytest; then the plugin is found by its entry point.
    src = tmp_path / "clients" / "python"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env["PIP_NO_INDEX"] = "1"  # proves it needs no package index
    r = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-build-isolation", "./clients/python"],
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
    assert str(venv) in r.stdout

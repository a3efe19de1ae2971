"""The pytest plugin of the Mayfly client. The default fixture,
``mayfly_recipient``, is a :class:`mayfly.Recipient`: a tagged address of
its own per test on one shared inbox per session (per pytest-xdist worker),
so a suite spends one creation per worker per hour and stays within a
public service's creation limits (5 a minute, 10 an hour, 20 a day per IP).
``mayfly_inbox`` creates an inbox per test and deletes it afterwards.

Installed with the package, pytest loads it by itself (the ``pytest11``
entry point); from a clone, load it with ``-p mayfly.pytest_plugin``.

Configure it without overriding a fixture. Each setting is, first found:
a command-line option, an environment variable, an ini option (pytest.ini,
``[tool.pytest.ini_options]`` of pyproject.toml, tox.ini, setup.cfg), the
default:

============================  ===========================  ============================  ==========================
command line                  environment                  ini option                    default
============================  ===========================  ============================  ==========================
``--mayfly-url``              ``MAYFLY_URL``               ``mayfly_url``                ``http://127.0.0.1:8080/v1``
``--mayfly-timeout``          ``MAYFLY_TIMEOUT``           ``mayfly_timeout``            20 (seconds; every wait)
``--mayfly-lifetime``         ``MAYFLY_LIFETIME``          ``mayfly_lifetime``           the service's (minutes)
``--mayfly-wait-for-capacity`` ``MAYFLY_WAIT_FOR_CAPACITY`` ``mayfly_wait_for_capacity`` off
============================  ===========================  ============================  ==========================

``--mayfly-wait-for-capacity`` is a flag (it takes no value); the
environment variable and the ini option take 1/true/yes/on.

A test's own deadline: ``mayfly_recipient.wait_for_message(..., timeout=5)``.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Optional

import pytest

from ._recipient import Recipient
from ._shared import SharedInbox
from .client import DEFAULT_WAIT_TIMEOUT, Client, Inbox

DEFAULT_URL = "http://127.0.0.1:8080/v1"

# name: (environment variable, help)
_SETTINGS = {
    "url": ("MAYFLY_URL", f"base URL of the Mayfly API, with /v1 (default {DEFAULT_URL})"),
    "timeout": ("MAYFLY_TIMEOUT", f"default deadline of every wait, in seconds (default {DEFAULT_WAIT_TIMEOUT:g})"),
    "lifetime": ("MAYFLY_LIFETIME", "lifetime of each fixture inbox, in minutes (default: the service's)"),
    "wait_for_capacity": ("MAYFLY_WAIT_FOR_CAPACITY",
                          "wait out a creation limit instead of failing the test (1/true/yes; default off)"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mayfly", "Mayfly temporary inboxes")
    for name, (env, text) in _SETTINGS.items():
        flag = {"action": "store_true"} if name == "wait_for_capacity" else {}
        if flag:
            text = "wait out a creation limit instead of failing the test (a flag; default off)"
        group.addoption(f"--mayfly-{name.replace('_', '-')}", dest=f"mayfly_{name}", default=None,
                        help=f"{text}; else ${env}, else the ini option mayfly_{name}", **flag)
        parser.addini(f"mayfly_{name}", f"{text}; --mayfly-{name.replace('_', '-')} and ${env} win", default="")


def _setting(config: pytest.Config, name: str) -> Optional[str]:
    """The command line's, else the environment's, else the ini file's
    value of a setting; None when none sets it."""
    for value in (config.getoption(f"mayfly_{name}"), os.environ.get(_SETTINGS[name][0]),
                  config.getini(f"mayfly_{name}")):
        if value is True:
            return "true"  # a flag given
        if value not in (None, "", False):
            return str(value).strip()
    return None


def _capacity(config: pytest.Config) -> bool:
    return (_setting(config, "wait_for_capacity") or "").lower() in ("1", "true", "yes", "on")


def _number(config: pytest.Config, name: str) -> Optional[float]:
    value = _setting(config, name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise pytest.UsageError(f"mayfly_{name} ({_SETTINGS[name][0]}): {value!r} is not a number") from None


@pytest.fixture(scope="session")
def mayfly_url(request: pytest.FixtureRequest) -> str:
    """The service's base URL: --mayfly-url, $MAYFLY_URL, the ini option
    mayfly_url, or the default."""
    return _setting(request.config, "url") or DEFAULT_URL


@pytest.fixture(scope="session")
def mayfly_client(request: pytest.FixtureRequest, mayfly_url: str) -> Client:
    """A :class:`mayfly.Client` of the service, shared by the session; its
    waits' default deadline is mayfly_timeout (20 s)."""
    timeout = _number(request.config, "timeout")
    return Client(mayfly_url, wait_timeout=DEFAULT_WAIT_TIMEOUT if timeout is None else timeout)


@pytest.fixture
def mayfly_inbox(request: pytest.FixtureRequest, mayfly_client: Client) -> Iterator[Inbox]:
    """A new inbox (created and selected, its own cookie jar), deleted after
    the test (also when the test deleted it: delete() is idempotent)."""
    lifetime = _number(request.config, "lifetime")
    capacity = _capacity(request.config)
    kw: Any = {"wait_for_capacity": capacity}
    if capacity:
        kw["timeout"] = mayfly_client.wait_timeout
    inbox = mayfly_client.create_inbox(None if lifetime is None else int(lifetime), **kw)
    try:
        yield inbox
    finally:
        inbox.delete()


@pytest.fixture(scope="session")
def mayfly_shared_inbox(request: pytest.FixtureRequest, mayfly_client: Client) -> Iterator[SharedInbox]:
    """The session's (the pytest-xdist worker's) :class:`mayfly.SharedInbox`:
    created at the first ``mayfly_recipient``, extended or replaced as it
    nears its expiry or its 60-minute cap, deleted at the session's end."""
    lifetime = _number(request.config, "lifetime")
    capacity = _capacity(request.config)
    shared = SharedInbox(mayfly_client, lifetime_minutes=None if lifetime is None else int(lifetime),
                         wait_for_capacity=capacity, timeout=mayfly_client.wait_timeout if capacity else None)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def mayfly_recipient(request: pytest.FixtureRequest, mayfly_client: Client,
                     mayfly_shared_inbox: SharedInbox) -> Recipient:
    """The default fixture: a :class:`mayfly.Recipient`, a tagged address of
    the session's shared inbox made from the test's name (plus 10 random
    characters), whose waits are scoped to it and bounded by mayfly_timeout.
    Needs no cleanup."""
    r = mayfly_shared_inbox.recipient(request.node.name)
    r.timeout = mayfly_client.wait_timeout
    return r

"""The pytest plugin of the Mayfly client: a ``mayfly_inbox`` fixture that
creates an inbox for a test and deletes it afterwards.

Installed with the package, pytest loads it by itself (the ``pytest11``
entry point); from a clone, load it with ``-p mayfly.pytest_plugin``. The
service is ``--mayfly-url``, else the environment variable ``MAYFLY_URL``,
else ``http://127.0.0.1:8080/v1`` (what ``make run`` serves)."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from .client import Client, Inbox
from .errors import InboxGoneError

DEFAULT_URL = "http://127.0.0.1:8080/v1"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mayfly", "Mayfly temporary inboxes")
    group.addoption(
        "--mayfly-url",
        dest="mayfly_url",
        default=None,
        help=f"base URL of the Mayfly API, with /v1 (default: $MAYFLY_URL, else {DEFAULT_URL})",
    )


@pytest.fixture(scope="session")
def mayfly_url(request: pytest.FixtureRequest) -> str:
    """The service's base URL: --mayfly-url, $MAYFLY_URL, or the default."""
    return request.config.getoption("mayfly_url") or os.environ.get("MAYFLY_URL") or DEFAULT_URL


@pytest.fixture(scope="session")
def mayfly_client(mayfly_url: str) -> Client:
    """A :class:`mayfly.Client` of the service, shared by the session."""
    return Client(mayfly_url)


@pytest.fixture
def mayfly_inbox(mayfly_client: Client) -> Iterator[Inbox]:
    """A new inbox (created and selected, its own cookie jar), deleted after
    the test."""
    inbox = mayfly_client.create_inbox()
    try:
        yield inbox
    finally:
        try:
            inbox.delete()
        except InboxGoneError:
            pass

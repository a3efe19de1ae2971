"""A signup flow, MAYFLY_SUITE_TESTS times (200 by default), each test on a
tagged address of its own (the default fixture, mayfly_recipient) of the
session's one shared inbox: the suite passes twice in a row from one IP
against the public limits (conftest.py says more). Run it from the
repository's root:

    MAYFLY_URL=http://127.0.0.1:8080/v1 MAYFLY_SUITE_SMTP=127.0.0.1:2525 \
      PYTHONPATH=clients/python /usr/bin/python3 -m pytest -p mayfly.pytest_plugin \
      -p no:cacheprovider -q clients/python/suite --junitxml=report.xml
"""

import os

import pytest

import mayfly

TESTS = int(os.environ.get("MAYFLY_SUITE_TESTS", "200"))


@pytest.mark.parametrize("n", range(TESTS))
def test_signup(app, mayfly_recipient, n):
    app.post("/signup", {"email": mayfly_recipient.address})
    msg = mayfly_recipient.wait_for_message(subject="^Verify your email$")  # scoped to this test's address
    assert msg.to == mayfly_recipient.address
    code = mayfly.code(msg)
    link = next(link.url for link in mayfly.links_with_text(msg) if link.text == "Verify your email")
    assert app.post("/verify-code", {"email": mayfly_recipient.address, "code": code})["ok"]
    assert "Email verified" in app.get(link)

"""200 tests, each a resend flow: an inbox of its own (the mayfly_inbox
fixture), a first mail with a code, a wait; a second mail with a new code,
the same wait again, which returns the second (since="unseen")."""

import pytest

import mayfly


@pytest.mark.parametrize("n", range(200))
def test_resend(mayfly_inbox, send_mail, n):
    send_mail(mayfly_inbox.address, "Your code", f"Your code is {100000 + n}.")
    first = mayfly_inbox.wait_for_message(subject="^Your code$")
    send_mail(mayfly_inbox.address, "Your code", f"Your new code is {500000 + n}.")
    second = mayfly_inbox.wait_for_message(subject="^Your code$")
    assert mayfly.code(first) == str(100000 + n)
    assert mayfly.code(second) == str(500000 + n)

"""The retry rules of clients/SCENARIOS.md ("Retries") as one pure function:
an answer (status, code, Retry-After) or a transport failure, the kind of
request, the attempt that failed and the time left give the wait before the
next attempt, or None (give up: the error is raised). Its cases are
clients/testdata/retry.json, run by tests/test_unit.py."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Optional

from .errors import CREATION_LIMIT_CODES

#: The kinds of request (retry.json's "kind").
READ = "read"  # a GET of one call: also 500/503 and a failure after sending
CREATE = "create"  # POST /mailboxes: refusals only
WRITE = "write"  # select, PATCH, DELETE: refusals only
WAIT = "wait"  # a request of a wait or an event stream: as a read, no attempt cap

#: Transport failures (retry.json's "transport").
REFUSED = "refused"  # nothing was sent
RESET = "reset"  # after sending
TIMEOUT = "timeout"  # after sending


@dataclass(frozen=True)
class Policy:
    """The numbers of the rules, in seconds (retry.json's "policy")."""

    base: float = 0.2
    cap: float = 5.0
    max_attempts: int = 6
    max_retry_after: float = 10.0
    jitter: float = 0.25


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """A Retry-After header's seconds: a whole number of seconds, else None
    (an HTTP date or anything else is as if absent)."""
    if value is None:
        return None
    value = value.strip()
    if not value.isascii() or not value.isdigit():
        return None
    return float(int(value))


def backoff(attempt: int, policy: Policy = Policy(), rand: Callable[[float, float], float] = random.uniform) -> float:
    """Full jitter under a ceiling of base doubling from the first attempt,
    capped: attempt 1 waits up to 200 ms, attempt 3 up to 800 ms."""
    ceiling = min(policy.cap, policy.base * (2 ** min(max(attempt, 1) - 1, 30)))
    return rand(0, ceiling)


def decide(
    kind: str,
    attempt: int,
    *,
    status: int = 0,
    code: str = "",
    retry_after: Optional[float] = None,
    transport: str = "",
    remaining: Optional[float] = None,
    policy: Policy = Policy(),
    rand: Callable[[float, float], float] = random.uniform,
) -> Optional[float]:
    """The wait (seconds) before the attempt after ``attempt`` (1 = the
    first failed), or None to give up. ``transport`` names a failure
    without an answer (refused, reset, timeout); else ``status``, ``code``
    and ``retry_after`` (seconds, None when absent) are the answer's.
    ``remaining`` is the time left before the caller's deadline (None:
    none)."""
    if kind != WAIT and attempt >= policy.max_attempts:
        return None
    ra = retry_after
    if transport:
        if transport != REFUSED and kind not in (READ, WAIT):
            return None  # it may have been done
        wait = backoff(attempt, policy, rand)
    elif status == 429 and code in CREATION_LIMIT_CODES:
        return None
    elif status == 429 or (status == 503 and code == "REQUEST_PROTECTION"):
        # Refused before anything was done: every kind; the server's word,
        # else the request-rate window (1 s), plus jitter.
        if ra is not None and ra > policy.max_retry_after:
            return None
        wait = (1.0 if ra is None else ra) + rand(0, policy.jitter)
    elif status in (500, 503) and kind in (READ, WAIT):
        if ra is not None and ra > policy.max_retry_after:
            return None
        wait = backoff(attempt, policy, rand)
        if ra is not None and ra > wait:
            wait = ra
    else:
        return None
    if remaining is not None and wait >= remaining:
        return None
    return wait

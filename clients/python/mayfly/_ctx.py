"""The deadline and cancellation of one call or wait."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Set, Union

from .errors import CancelledError

#: What ``cancel=`` takes: a :class:`threading.Event` (or anything with
#: ``is_set()`` and ``wait(timeout)``), or a callable that returns True once
#: the call is to end (it is called from a watchdog thread, every 50 ms).
Cancel = Union[threading.Event, Callable[[], bool], None]

#: How often the watchdog looks at the cancel event and the deadline.
_WATCH_INTERVAL = 0.05


class Reach:
    """The transport failures in a row of one wait: since when every attempt
    has failed without an HTTP answer, and the last such failure."""

    def __init__(self) -> None:
        self.since: Optional[float] = None
        self.last: Optional[BaseException] = None

    def ok(self) -> None:
        self.since = None
        self.last = None

    def fail(self, e: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.last = e

    def down_for(self) -> Optional[float]:
        return None if self.since is None else time.monotonic() - self.since


class Ctx:
    """A deadline (``timeout`` seconds from now, or none) and an optional
    cancel event. While watching (``with ctx.watching():``), a watchdog
    thread shuts the sockets of the connections attached to it down the
    moment the event is set or the deadline passes, so a blocked read (an
    event stream) ends at once."""

    def __init__(self, timeout: Optional[float], cancel: Cancel, watch_deadline: bool = False) -> None:
        self._watch_deadline = watch_deadline
        #: Set for a wait: its transport failures in a row.
        self.reach: Optional[Reach] = None
        self.end = None if timeout is None else time.monotonic() + max(0.0, timeout)
        self.cancel = cancel
        self._event: Optional[Any] = None
        self._fn: Optional[Callable[[], bool]] = None
        if cancel is not None:
            if hasattr(cancel, "is_set") and hasattr(cancel, "wait"):
                self._event = cancel
            elif callable(cancel):
                self._fn = cancel
            else:
                raise TypeError("mayfly: cancel must be a threading.Event or a callable returning bool")
        self._lock = threading.Lock()
        self._conns: Set[Any] = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def remaining(self) -> Optional[float]:
        return None if self.end is None else self.end - time.monotonic()

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def cancelled(self) -> bool:
        if self._event is not None:
            return bool(self._event.is_set())
        return self._fn is not None and bool(self._fn())

    def check_cancel(self) -> None:
        if self.cancelled():
            raise CancelledError("cancelled")

    def socket_timeout(self, cap: float) -> float:
        rem = self.remaining()
        return cap if rem is None else max(0.001, min(cap, rem))

    def sleep(self, seconds: float, clamp: bool = False) -> bool:
        """Sleeps, ending at once on cancellation (CancelledError). When the
        sleep would pass the deadline it returns False: at once, or, with
        clamp, after sleeping until the deadline."""
        self.check_cancel()
        rem = self.remaining()
        if rem is not None and seconds >= rem:
            if not clamp:
                return False
            seconds = max(0.0, rem)
            self._wait(seconds)
            return False
        self._wait(seconds)
        return True

    def _wait(self, seconds: float) -> None:
        if self._event is not None:
            if self._event.wait(seconds):
                raise CancelledError("cancelled")
        elif self._fn is not None:
            end = time.monotonic() + seconds
            while True:
                self.check_cancel()
                left = end - time.monotonic()
                if left <= 0:
                    return
                time.sleep(min(left, _WATCH_INTERVAL))
        elif seconds > 0:
            time.sleep(seconds)

    # The watchdog.

    def attach(self, conn: Any) -> None:
        with self._lock:
            self._conns.add(conn)
        if self._thread is not None and (self.cancelled() or self.expired()):
            self._shut(conn)

    def detach(self, conn: Any) -> None:
        with self._lock:
            self._conns.discard(conn)

    def watching(self) -> "Ctx":
        return self

    def __enter__(self) -> "Ctx":
        # A plain call's deadline is its sockets' timeout; a stream's needs
        # the watchdog.
        if self._thread is None and (self.cancel is not None or (self._watch_deadline and self.end is not None)):
            self._thread = threading.Thread(target=self._watch, name="mayfly-watchdog", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _watch(self) -> None:
        while not self._stop.wait(_WATCH_INTERVAL):
            if self.cancelled() or self.expired():
                with self._lock:
                    conns = list(self._conns)
                for c in conns:
                    self._shut(c)

    @staticmethod
    def _shut(conn: Any) -> None:
        import socket

        sock = getattr(conn, "_mayfly_sock", None) or getattr(conn, "sock", None)
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

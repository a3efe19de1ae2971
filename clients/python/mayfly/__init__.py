"""The official Python client of Mayfly, the temporary receive-only inbox
service (and of any service that follows the same API, v1). Standard
library only.

    import mayfly

    client = mayfly.Client("http://127.0.0.1:8080/v1")
    with client.create_inbox() as inbox:           # deleted at the end
        sign_up(inbox.address)
        msg = inbox.wait_for_message(subject="Your code")   # timeout: seconds, 20 by default
        print(mayfly.code(msg))

The behaviour (waits, retries, the single "gone" error) is the one all
Mayfly clients share: clients/SCENARIOS.md in the repository.
"""

from .client import (
    DEFAULT_UNREACHABLE_AFTER,
    DEFAULT_WAIT_TIMEOUT,
    MIN_POLL_INTERVAL,
    Client,
    Inbox,
    RetryInfo,
)
from ._recipient import Recipient
from ._shared import SharedInbox
from .errors import (
    CancelledError,
    CreationLimitError,
    InboxGoneError,
    MayflyError,
    MessageNotFoundError,
    ProtocolError,
    RateLimitedError,
    SessionInvalidError,
    StreamBusyError,
    TransportError,
    UnexpectedMessageError,
    UnreachableError,
    WaitTimeoutError,
)
from .helpers import Link, code, codes, links, links_with_text
from .models import (
    EVENT_MESSAGE_RECEIVED,
    STATUS_FAILED,
    STATUS_PENDING,
    STATUS_READY,
    Event,
    Mailbox,
    Message,
    MessageSummary,
    Page,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Inbox",
    "Recipient",
    "SharedInbox",
    "RetryInfo",
    "MIN_POLL_INTERVAL",
    "DEFAULT_WAIT_TIMEOUT",
    "DEFAULT_UNREACHABLE_AFTER",
    "Mailbox",
    "MessageSummary",
    "Message",
    "Page",
    "Event",
    "EVENT_MESSAGE_RECEIVED",
    "STATUS_PENDING",
    "STATUS_READY",
    "STATUS_FAILED",
    "links",
    "links_with_text",
    "Link",
    "code",
    "codes",
    "MayflyError",
    "InboxGoneError",
    "CreationLimitError",
    "RateLimitedError",
    "SessionInvalidError",
    "WaitTimeoutError",
    "UnreachableError",
    "MessageNotFoundError",
    "UnexpectedMessageError",
    "StreamBusyError",
    "CancelledError",
    "TransportError",
    "ProtocolError",
]

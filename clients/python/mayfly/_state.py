"""Save and restore (clients/SCENARIOS.md, "Save and restore"): an inbox's
cookies, mailbox and seen ids in the JSON format the three clients share."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Union

from . import _jar
from ._internal import InboxCore
from ._transport import field
from .errors import InboxGoneError
from .models import Mailbox

if TYPE_CHECKING:
    from .client import Client

#: The version of the format of Inbox.state() (clients/SCENARIOS.md).
STATE_VERSION = 1


def save(core: InboxCore) -> Dict[str, Any]:
    """The state of an inbox (see :meth:`Inbox.state`)."""
    mb = core.mailbox
    mailbox: Dict[str, Any] = {"id": mb.id, "address": mb.address, "kind": mb.kind}
    for name in ("expires_at", "max_expires_at"):
        t = getattr(mb, name)
        mailbox[name] = None if t is None else _jar.rfc3339(t)  # null when the service gave none, as Go and TS
    with core.lock:
        seen = list(core.seen)
    st: Dict[str, Any] = {"version": STATE_VERSION, "base": core.client.base_url, "mailbox": mailbox,
                          "cookies": _jar.dump(core.jar), "seen": seen}
    if core.gone is not None:
        st["gone"] = True
    return st


def restore(client: "Client", state: Union[str, bytes, Dict[str, Any]]) -> InboxCore:
    """The state of a saved inbox (see :meth:`Client.restore`); no request."""
    if isinstance(state, (str, bytes)):
        state = json.loads(state)
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise ValueError(f"mayfly: not an inbox state of version {STATE_VERSION}")
    base = str(state.get("base", "")).rstrip("/")
    if base != client.base_url:
        raise ValueError(f"mayfly: the state is of {base!r}, not of this client's {client.base_url!r}")
    core = InboxCore(client, _jar.load(client.base_url, state.get("cookies") or []))
    core.mailbox = Mailbox.from_json(field(state, "mailbox"))
    core.seen = dict.fromkeys(str(i) for i in state.get("seen") or [])
    if state.get("gone"):
        core.gone = InboxGoneError("inbox gone (restored from a state marked gone)", url=client.base_url)
    return core

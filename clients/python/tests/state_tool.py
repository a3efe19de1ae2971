#!/usr/bin/env python3
"""The Python side of the cross-language state test (clients/SCENARIOS.md,
state-round-trip): reads an inbox state (the shared JSON format, written by
any of the three clients) on stdin, restores it, waits for a message it has
not seen (since="unseen") for argv[1] seconds, and prints one JSON line
{"subject": <the message's subject>, "state": <the inbox's new state>} on
stdout. On an error: the error on stderr, exit 1.

    python3 clients/python/tests/state_tool.py 15 < state.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the package of this clone

import mayfly  # noqa: E402


def main(argv: list) -> int:
    if len(argv) != 2:
        print("usage: state_tool.py TIMEOUT_SECONDS < state.json", file=sys.stderr)
        return 2
    try:
        state = json.load(sys.stdin)
        inbox = mayfly.Client(state.get("base", "")).restore(state)
        msg = inbox.wait_for_message(timeout=float(argv[1]))
    except (mayfly.MayflyError, ValueError, KeyError, TypeError) as e:
        print(f"state_tool: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"subject": msg.subject, "state": inbox.state()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

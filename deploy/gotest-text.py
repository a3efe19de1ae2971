#!/usr/bin/env python3
"""gotest-text.py — reads `go test -json` on stdin and prints what `go test`
without -json prints: each package's result line, the output of each failed
test (with its log lines), build errors and anything outside a test (a
panic, a timeout). deploy/test.sh runs the suites with -json so that
clients/check-scenarios.sh can see which tests ran, and shows this text."""
import json
import sys

# -v (GOTESTFLAGS='-v' in make test): print every test's output, as go test -v.
verbose = "-v" in sys.argv[1:]
buf = {}  # (package, test) -> output lines
for line in sys.stdin:
    try:
        ev = json.loads(line)
    except ValueError:
        sys.stdout.write(line)  # not an event: go's own message
        sys.stdout.flush()
        continue
    action, test = ev.get("Action"), ev.get("Test")
    key = (ev.get("Package") or ev.get("ImportPath"), test)
    if action == "build-output":
        sys.stdout.write(ev.get("Output", ""))
    elif action == "output" and test and verbose:
        sys.stdout.write(ev.get("Output", ""))
    elif action == "output" and test:
        out = ev.get("Output", "")
        if not out.startswith(("=== RUN", "=== PAUSE", "=== CONT", "=== NAME")):
            buf.setdefault(key, []).append(out)
    elif action == "output":
        out = ev.get("Output", "")
        if out.strip() != "PASS" or verbose:  # go test prints "ok pkg" without it
            sys.stdout.write(out)
    elif action == "fail" and test:
        sys.stdout.write("".join(buf.pop(key, [])))
    elif action in ("pass", "skip") and test:
        buf.pop(key, None)
    sys.stdout.flush()

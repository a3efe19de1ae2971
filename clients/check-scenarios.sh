#!/usr/bin/env bash
# check-scenarios.sh — every scenario of clients/SCENARIOS.md is implemented
# by every client that exists (clients/go, clients/typescript,
# clients/python). Exits 1 naming each scenario a client misses.
#
#   check-scenarios.sh                 the tests' sources name every id (make lint)
#   check-scenarios.sh --reports DIR   and the runners' reports show each
#                                      scenario's test RAN and passed (make test)
#
# Naming (SCENARIOS.md, "Naming and reports"): Go TestScenario<CamelId> or a
# subtest named <id>; TypeScript a test title starting with <id>; Python
# test_<snake_id>. In the sources a comment `scenario: <id>` also names one.
#
# Reports: DIR/go/*, DIR/typescript/*, DIR/python/* — any number of files
# each, whatever their names, the format read from the content: `go test
# -json` (one JSON event a line; other lines are passed over), JUnit XML
# (node --test-reporter=junit, pytest --junitxml), or TAP (node
# --test-reporter=tap). A scenario counts as run when at least one test of
# its name passed (not skipped) in the client's reports.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reports=""
while (($# > 0)); do
	case $1 in
	--reports) reports=$(cd "$2" && pwd); shift 2 ;;
	--reports=*) reports=$(cd "${1#--reports=}" && pwd); shift ;;
	*) echo "usage: $0 [--reports DIR]" >&2; exit 2 ;;
	esac
done
cd "$repo"

# The ids: the first column of the scenario table, `id` in backquotes.
mapfile -t ids < <(sed -n '/^## Scenarios/,$p' clients/SCENARIOS.md |
	grep -oE '^\| `[a-z0-9-]+` \|' | grep -oE '[a-z0-9-]+')
((${#ids[@]} > 0)) || { echo "check-scenarios: no scenario ids found in clients/SCENARIOS.md" >&2; exit 1; }

test_files() {
	case $1 in
	go)
		find cmd/mayfly clients/go -name '*_test.go' ;;
	typescript)
		find clients/typescript -path '*/node_modules' -prune -o -type f \
			\( -name '*.test.*' -o -name '*.spec.*' -o -path '*/test/*' -o -path '*/tests/*' \) -print ;;
	python)
		find clients/python \( -name '.venv' -o -name '__pycache__' \) -prune -o -type f \
			\( -name 'test_*.py' -o -name '*_test.py' -o -path '*/tests/*.py' \) -print ;;
	esac
}

# A scenario is named by `scenario: <id>` (a comment), or by a test's name:
# Go func TestScenarioSignupFlow (case aside), Python def test_signup_flow,
# TypeScript test('signup-flow ...') (the id quoted at the start of a string).
named() {
	local id=$1; shift
	local snake=${id//-/_} flat=${id//-/}
	grep -qiE "scenario: ${id}([^a-z0-9-]|\$)|func TestScenario${flat}\(|t\.Run\(\"${id}\"|def test_${snake}\(|['\"\`]${id}([^a-z0-9-])" "$@"
}

# ran prints the ids of the scenarios whose tests passed in the reports of
# one client (DIR/<client>/*), and on stderr the ones whose tests failed or
# were skipped.
ran() {
	python3 - "$1" "$2" "${ids[@]}" <<'PY'
import json, os, re, sys
import xml.etree.ElementTree as ET

client, folder, ids = sys.argv[1], sys.argv[2], sys.argv[3:]

def names(name):
    """The scenario ids a test of that name stands for."""
    out = []
    low = name.lower()
    for i in ids:
        if client == "go":
            flat = "testscenario" + i.replace("-", "")
            parts = low.split("/")
            if parts[0] == flat or i in parts[1:]:
                out.append(i)
        elif client == "python":
            base = low.split("[", 1)[0]
            if base == "test_" + i.replace("-", "_"):
                out.append(i)
        else:
            if re.match(re.escape(i) + r"($|[^a-z0-9-])", low):
                out.append(i)
    return out

results = []  # (test name, "pass" | "fail" | "skip")

def go_json(text):
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("Test") and ev.get("Action") in ("pass", "fail", "skip"):
            results.append((ev["Test"], ev["Action"]))

def junit(text):
    root = ET.fromstring(text)
    for tc in root.iter("testcase"):
        kids = {c.tag for c in tc}
        state = "fail" if kids & {"failure", "error"} else "skip" if "skipped" in kids else "pass"
        results.append((tc.get("name", ""), state))

def tap(text):
    for line in text.splitlines():
        m = re.match(r"\s*(not ok|ok)\s+\d+\s*(?:-\s*)?(.*)$", line)
        if not m:
            continue
        name, directive = m.group(2), ""
        if " # " in name:
            name, directive = name.split(" # ", 1)
        state = "fail" if m.group(1) == "not ok" else "pass"
        if re.match(r"(?i)(skip|todo)", directive.strip()):
            state = "skip"
        results.append((name.strip(), state))

if os.path.isdir(folder):
    for f in sorted(os.listdir(folder)):
        path = os.path.join(folder, f)
        if not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        head = text.lstrip()[:200]
        try:
            if head.startswith("<"):
                junit(text)
            elif head.startswith("TAP version") or re.search(r"(?m)^\s*(not )?ok \d+", text[:5000]):
                tap(text)
            else:
                go_json(text)
        except ET.ParseError as e:
            print(f"check-scenarios: {path}: not a JUnit report: {e}", file=sys.stderr)

passed, other = set(), {}
for name, state in results:
    for i in names(name):
        if state == "pass":
            passed.add(i)
        else:
            other.setdefault(i, set()).add(f"{name}: {state}")
for i in ids:
    if i in passed:
        print(i)
    elif i in other:
        print(f"check-scenarios: clients/{client} {i}: " + "; ".join(sorted(other[i])), file=sys.stderr)
PY
}

rc=0
checked=0
for client in go typescript python; do
	[[ -d clients/$client ]] || continue
	mapfile -t files < <(test_files "$client")
	if ((${#files[@]} == 0)); then
		echo "check-scenarios: clients/$client has no test files" >&2
		rc=1
		continue
	fi
	missing=()
	for id in "${ids[@]}"; do
		named "$id" "${files[@]}" || missing+=("$id")
	done
	if ((${#missing[@]} > 0)); then
		echo "check-scenarios: clients/$client's tests do not name: ${missing[*]}" >&2
		rc=1
	fi
	if [[ -n $reports ]]; then
		if [[ ! -d $reports/$client ]] || [[ -z $(ls -A "$reports/$client") ]]; then
			echo "check-scenarios: no report of clients/$client's tests in $reports/$client" >&2
			rc=1
		else
			mapfile -t passed < <(ran "$client" "$reports/$client")
			notrun=()
			for id in "${ids[@]}"; do
				[[ " ${passed[*]} " == *" $id "* ]] || notrun+=("$id")
			done
			if ((${#notrun[@]} > 0)); then
				echo "check-scenarios: clients/$client's report shows no passing test for: ${notrun[*]}" >&2
				rc=1
			fi
		fi
	fi
	checked=$((checked + 1))
done
if ((rc == 0)); then
	if [[ -n $reports ]]; then
		echo "check-scenarios: ${#ids[@]} scenarios run and passed in the reports of $checked client(s)"
	else
		echo "check-scenarios: ${#ids[@]} scenarios named by the tests of $checked client(s)"
	fi
fi
exit "$rc"

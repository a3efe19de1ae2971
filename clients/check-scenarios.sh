#!/usr/bin/env bash
# check-scenarios.sh — every scenario of clients/SCENARIOS.md is named by the
# tests of every client that exists (clients/go, clients/typescript,
# clients/python): as `scenario: <id>` in a comment or in a test's name.
# Exits 1 naming each scenario a client's tests miss.
#
# Where each client's scenario tests live:
#   go          cmd/mayfly/*_test.go (they run the real `mayfly all` in process)
#               and clients/go/**/*_test.go
#   typescript  clients/typescript: *.test.ts, *.spec.ts, files under test/ or tests/
#   python      clients/python: test_*.py, *_test.py, files under tests/
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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
			\( -name '*.test.ts' -o -name '*.spec.ts' -o -name '*.test.mts' -o -path '*/test/*' -o -path '*/tests/*' \) -print ;;
	python)
		find clients/python \( -name '.venv' -o -name '__pycache__' \) -prune -o -type f \
			\( -name 'test_*.py' -o -name '*_test.py' -o -path '*/tests/*.py' \) -print ;;
	esac
}

# A scenario is named by `scenario: <id>` (a comment), or by a test's name:
# Go func TestScenarioSignupFlow, Python def test_signup_flow, TypeScript
# test('signup-flow ...') (the id quoted at the start of a string).
named() {
	local id=$1; shift
	local snake=${id//-/_} camel=""
	local part
	IFS=- read -ra parts <<<"$id"
	for part in "${parts[@]}"; do camel+=${part^}; done
	grep -qE "scenario: ${id}([^a-z0-9-]|\$)|func Test[A-Za-z0-9_]*${camel}\(|def test_[a-z0-9_]*${snake}\(|['\"\`]${id}([^a-z0-9-])" "$@"
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
	checked=$((checked + 1))
done
((rc == 0)) && echo "check-scenarios: ${#ids[@]} scenarios named by the tests of $checked client(s)"
exit "$rc"

#!/usr/bin/env bash
# suites.sh — the public-limits suites: each client's 200-test signup suite
# (clients/<lang>/suite), run twice in a row from one IP against a
# `bin/mayfly all` that keeps the binary's own defaults, the public spec's
# limits (5 creations a minute, 10 an hour, 20 a day and 5 active inboxes
# per IP, refused attempts counted; 8 requests a second). Nothing of
# deploy/dev.env is set: only addresses, the Redis prefix and
# MAYFLY_COOKIE_SECURE=false (the stack is plain HTTP on loopback).
#
# Usage: MAYFLY_TEST_REDIS_ADDRS=… deploy/suites.sh [go] [typescript] [python]
# (default all three, in parallel: each has its own stack and Redis prefix,
# so its own IP budget). MAYFLY_SUITE_TESTS sets the tests per run (default
# 200); MAYFLY_SUITE_REPORTS the directory of the runners' reports (default
# a temporary one). make test runs it; it exits non-zero when a run fails
# or a run used more creations than the limits allow a suite to need.
#
# Each run prints one line: the language, the run, its result, the
# creations it made (POST /mailboxes answered 201, from the node's
# /metrics), the creations refused (429) and its wall time.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

: "${MAYFLY_TEST_REDIS_ADDRS:?set MAYFLY_TEST_REDIS_ADDRS (make cluster-up; make test sets it)}"
tests=${MAYFLY_SUITE_TESTS:-200}
langs=("$@")
((${#langs[@]} > 0)) || langs=(go typescript python)
work=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-suites.XXXXXX")
reports=${MAYFLY_SUITE_REPORTS:-$work/reports}
mkdir -p "$reports"
pids=()
# kill_tree PID: PID and every process below it (a stack, a test runner,
# its browser), children first.
kill_tree() {
	local c
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
	kill "$1" 2>/dev/null || true
}
cleanup() {
	local p
	for p in "${pids[@]}"; do kill_tree "$p"; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

[[ -x bin/mayfly ]] || go build -o bin/mayfly ./cmd/mayfly

# free_ports N prints N free loopback TCP ports.
free_ports() {
	python3 - "$1" <<-'EOF'
		import socket, sys
		socks = [socket.socket() for _ in range(int(sys.argv[1]))]
		for s in socks:
		    s.bind(("127.0.0.1", 0))
		print(" ".join(str(s.getsockname()[1]) for s in socks))
	EOF
}

# metric ADMIN STATUS: POST /mailboxes answers of that status so far.
creations() {
	curl -fsS "http://$1/metrics" |
		awk -v st="$2" '/^mayfly_http_requests_total\{/ && /route="POST \/mailboxes"/ && $0 ~ "status=\"" st "\"" {n += $NF} END {print n + 0}'
}

# run_suite LANG URL SMTP REPORT: one run of LANG's suite; its exit code.
run_suite() {
	local lang=$1 url=$2 smtp=$3 report=$4
	case $lang in
	go)
		(cd clients/go && MAYFLY_URL=$url MAYFLY_SUITE_SMTP=$smtp MAYFLY_SUITE_TESTS=$tests \
			go test -tags suite -count=1 -json ./suite >"$report.json")
		;;
	typescript)
		[[ -x clients/typescript/node_modules/.bin/playwright ]] ||
			(cd clients/typescript && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
		(cd clients/typescript && MAYFLY_URL=$url MAYFLY_SUITE_SMTP=$smtp MAYFLY_SUITE_TESTS=$tests \
			MAYFLY_SUITE_JUNIT=$report.xml MAYFLY_SUITE_OUTPUT=$report.out \
			node_modules/.bin/playwright test -c suite)
		;;
	python)
		local py=python3
		"$py" -c 'import pytest' 2>/dev/null || py=/usr/bin/python3
		MAYFLY_URL=$url MAYFLY_SUITE_SMTP=$smtp MAYFLY_SUITE_TESTS=$tests PYTHONPATH=clients/python \
			"$py" -m pytest -q -p no:cacheprovider -p mayfly.pytest_plugin \
			--junitxml="$report.xml" clients/python/suite
		;;
	*)
		echo "suites.sh: no suite for $lang (go, typescript, python)" >&2
		return 2
		;;
	esac
}

# one LANG: its stack, two runs, a line per run in $work/LANG.result.
one() {
	local lang=$1 http smtp admin node rc=0 run t0 made refused before429 ok
	read -r http smtp admin < <(free_ports 3)
	env -i PATH="$PATH" HOME="${HOME:-/tmp}" \
		MAYFLY_REDIS_ADDRS="$MAYFLY_TEST_REDIS_ADDRS" \
		MAYFLY_REDIS_PASSWORD="${MAYFLY_TEST_REDIS_PASSWORD:-}" \
		MAYFLY_REDIS_TLS_CA_FILE="${MAYFLY_TEST_REDIS_TLS_CA_FILE:-}" \
		MAYFLY_REDIS_PREFIX="suite-$lang-$$-$RANDOM" \
		MAYFLY_HTTP_ADDR="127.0.0.1:$http" MAYFLY_SMTP_ADDR="127.0.0.1:$smtp" \
		MAYFLY_ADMIN_ADDR="127.0.0.1:$admin" MAYFLY_DOMAINS=mayfly.test \
		MAYFLY_COOKIE_SECURE=false MAYFLY_DRAIN_DELAY=0 \
		bin/mayfly all >"$work/$lang.node.log" 2>&1 &
	node=$!
	for _ in $(seq 100); do
		curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	for run in 1 2; do
		before=$(creations "127.0.0.1:$admin" 201)
		before429=$(creations "127.0.0.1:$admin" 429)
		t0=$(date +%s%3N)
		ok=passed
		run_suite "$lang" "http://127.0.0.1:$http/v1" "127.0.0.1:$smtp" "$reports/$lang-suite-$run" \
			>"$work/$lang.run$run.log" 2>&1 || { ok=FAILED; rc=1; }
		made=$(($(creations "127.0.0.1:$admin" 201) - before))
		refused=$(($(creations "127.0.0.1:$admin" 429) - before429))
		printf '%-10s run %d: %s, %d tests, %d creations, %d creations refused, %d s\n' \
			"$lang" "$run" "$ok" "$tests" "$made" "$refused" $((($(date +%s%3N) - t0) / 1000)) \
			>>"$work/$lang.result"
		if [[ $ok == FAILED ]]; then
			tail -n 40 "$work/$lang.run$run.log" | sed "s/^/$lang run $run: /" >>"$work/$lang.result"
		fi
	done
	kill "$node" 2>/dev/null || true
	wait "$node" 2>/dev/null || true
	return "$rc"
}

for lang in "${langs[@]}"; do
	one "$lang" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for lang in "${langs[@]}"; do cat "$work/$lang.result" 2>/dev/null || echo "$lang: no result"; done
exit "$rc"

#!/usr/bin/env bash
# test.sh — `make test`: every Go test against a fresh throwaway Redis Cluster.
#
# The cluster gets its own temp dir (not .cluster/state), so a `make test`
# never touches a cluster someone started with `make cluster-up`, nor another
# `make test` running at the same time. It is torn down however the tests end,
# Ctrl-C included, and go test's exit code is this script's.
#
# Extra arguments go to `go test` in place of ./... (e.g. `./storage/...`);
# GOTESTFLAGS adds flags (e.g. GOTESTFLAGS='-run TestX -v').
#
# On a full run every client suite writes its runner's report (go test
# -json, node's JUnit reporter, pytest --junitxml) under $MAYFLY_TEST_REPORTS
# (default: a directory in the run's temp dir, removed with it), and
# clients/check-scenarios.sh then checks that each scenario of
# clients/SCENARIOS.md ran and passed in every client's report.
#
# MAYFLY_TEST_TLS=1 makes the shared cluster one like a managed Redis: a
# random password and TLS only, with certificates made for the run
# (storage/storagetest/gencerts); the tests reach it through
# MAYFLY_TEST_REDIS_PASSWORD and MAYFLY_TEST_REDIS_TLS_CA_FILE.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$here/lib.sh"

bash "$here/install-deps.sh" --checks

ms() { date +%s%3N; }

# fuzz_deadline_race: the fuzz log in $1 failed only by Go's coordinator
# race at the -fuzztime deadline (go.dev/issue/75804): one "--- FAIL" whose
# only message is "context deadline exceeded", and no failing input.
fuzz_deadline_race() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q 'Failing input written\|fuzzing process hung\|panic:\|_test.go:[0-9]*:' "$1" &&
		(($(grep -c '^--- FAIL' "$1") == 1))
}

# node_test_with_reports DIR runs the package's `npm test` script with
# node's JUnit reporter added to each `node --test` in it (a report per
# run, under DIR) beside the usual spec output. (npm test -- FLAGS would put
# the flags after the test files, where node takes them for files; and
# NODE_OPTIONS would reach a node --test that a test itself starts.)
node_test_with_reports() {
	local dir=$1 script n=0 out=""
	script=$(node -p 'require("./package.json").scripts.test')
	while [[ $script == *"node --test"* ]]; do
		n=$((n + 1))
		out+="${script%%node --test*}node --test --test-reporter=spec --test-reporter-destination=stdout"
		out+=" --test-reporter=junit --test-reporter-destination=$dir/node-$n.xml"
		script=${script#*node --test}
	done
	out+=$script
	((n > 0)) || echo "test.sh: the npm test script runs no node --test: no report" >&2
	PATH=$PWD/node_modules/.bin:$PATH bash -c "$out"
}

MAYFLY_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-test-cluster.XXXXXX")
export MAYFLY_CLUSTER_DIR

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n ${suites_pid:-} ]]; then # the public-limits suites, still running
		kill "$suites_pid" 2>/dev/null || true
		wait "$suites_pid" 2>/dev/null || true
	fi
	local t0
	t0=$(ms)
	bash "$here/cluster.sh" down || true
	log "cluster down in $(($(ms) - t0)) ms"
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$(ms)
if [[ -n ${MAYFLY_TEST_TLS:-} ]]; then
	# Only cluster.sh sees the MAYFLY_CLUSTER_* settings: the clusters that
	# tests start with it themselves (deploy/topology) stay plaintext.
	tls_dir=$MAYFLY_CLUSTER_DIR/tls
	(cd "$repo" && go run ./storage/storagetest/gencerts "$tls_dir")
	password=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
	addrs=$(MAYFLY_CLUSTER_TLS_DIR=$tls_dir MAYFLY_CLUSTER_PASSWORD=$password bash "$here/cluster.sh" up)
	export MAYFLY_TEST_REDIS_PASSWORD=$password MAYFLY_TEST_REDIS_TLS_CA_FILE=$tls_dir/ca.crt
	log "the cluster requires a password and TLS"
else
	addrs=$(bash "$here/cluster.sh" up)
fi
log "cluster $addrs up in $(($(ms) - t0)) ms"

pkgs=("$@")
((${#pkgs[@]} > 0)) || pkgs=(./...)
cd "$repo"
reports=${MAYFLY_TEST_REPORTS:-$MAYFLY_CLUSTER_DIR/reports}
mkdir -p "$reports/go" "$reports/typescript" "$reports/python"
reports=$(cd "$reports" && pwd)
# -v among GOTESTFLAGS: the text shows every test's output.
verbose=()
[[ " ${GOTESTFLAGS:-} " =~ \ -(test\.)?v(=true)?\  ]] && verbose=(-v)
set +e
# go test -json (the report) shown as go test's usual text.
# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
MAYFLY_TEST_REDIS_ADDRS=$addrs go test -json -race -count=1 -timeout 8m ${GOTESTFLAGS:-} "${pkgs[@]}" |
	tee "$reports/go/root.json" | python3 "$here/gotest-text.py" "${verbose[@]}"
rc=${PIPESTATUS[0]}
# The client's own module (standard library only: no server dependency), its
# fault-injection tests and its examples, which run against a bin/mayfly
# of their own on this cluster (example_main_test.go), and its scenarios
# (clients/go/scenarios) bin/mayfly all as a process of their own.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	go build -o bin/mayfly ./cmd/mayfly &&
		(cd clients/go && MAYFLY_TEST_REDIS_ADDRS=$addrs go test -json -race -count=1 ./... |
			tee "$reports/go/client.json" | python3 "$here/gotest-text.py"; exit "${PIPESTATUS[0]}") || rc=$?
fi
# The TypeScript client (clients/typescript): its unit and package tests and
# the scenarios of clients/SCENARIOS.md against its own `bin/mayfly all` on
# this cluster. dist/ is committed; a test checks it is the build of src/.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	go build -o bin/mayfly ./cmd/mayfly &&
		(cd clients/typescript && npm ci --prefer-offline --no-audit --no-fund --loglevel=error &&
			MAYFLY_TEST_REDIS_ADDRS=$addrs node_test_with_reports "$reports/typescript") || rc=$?
fi
# The public-limits suites (deploy/suites.sh): each client's 200-test signup
# suite, twice in a row from one IP, against a bin/mayfly with the binary's
# own defaults (the spec's limits). They spend most of their time inside the
# request rate and the SMTP rate of one IP (120 mails a minute: 400 mails
# take 3.5 minutes at least), so they run in the background beside the
# steps below, and the run waits for them at the end. They start after the
# Go and TypeScript clients' tests, whose fault tests time the clients'
# backoff to a few milliseconds.
suites_pid=""
if ((rc == 0)) && [[ ${pkgs[*]} == ./... && -z ${MAYFLY_SKIP_SUITES:-} ]]; then
	MAYFLY_TEST_REDIS_ADDRS=$addrs MAYFLY_SUITE_REPORTS=$reports/suites \
		bash "$here/suites.sh" >"$MAYFLY_CLUSTER_DIR/suites.log" 2>&1 &
	suites_pid=$!
fi
# The Python client's unit and scenario suite (clients/python/tests, about 3 minutes): its
# harness starts its own bin/mayfly against this cluster. pytest is Debian's
# (install-deps.sh), so the python3 that has it runs the suite.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	py=python3
	"$py" -c 'import pytest' 2>/dev/null || py=/usr/bin/python3
	go build -o bin/mayfly ./cmd/mayfly &&
		MAYFLY_TEST_REDIS_ADDRS=$addrs "$py" -m pytest -q -p no:cacheprovider \
			--junitxml="$reports/python/pytest.xml" clients/python/tests || rc=$?
fi
# Every client's scenario tests ran and passed, by the runners' reports.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	bash clients/check-scenarios.sh --reports "$reports" || rc=$?
fi
# The go-smtp fork's own module (third_party/go-smtp: the patches of its
# README, each with its tests) on every full run.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	(cd third_party/go-smtp && go test -race -count=1 ./...) || rc=$?
fi
# The bench module's own unit tests (the results file's marked sections; its
# load tools are proved by make bench-smoke) on every full run.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	(cd bench && go test -count=1 ./internal/...) || rc=$?
fi
# The deploy artifacts' own module (Kubernetes types, buildkit's Dockerfile
# parser: kept out of Mayfly's go.mod) on every full run.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... ]]; then
	(cd deploy/check && go test -count=1 ./...) || rc=$?
fi
# The public-limits suites end here, before the fuzz run: the fuzzer's
# workers beside a browser and three stacks on two cores missed the fuzz
# deadline once ("context deadline exceeded", no input found).
if [[ -n $suites_pid ]]; then
	wait "$suites_pid" || rc=1
	suites_pid=""
	echo "--- the public-limits suites (deploy/suites.sh)"
	cat "$MAYFLY_CLUSTER_DIR/suites.log"
fi
# A short fuzz run of MIME parsing (both paths agreeing), HTML sanitizing and the HTTP request
# path (through a real edge node on the test cluster) on every full run, so
# new code meets fresh inputs; longer runs are for `go test -fuzz` by hand.
# A shorter minimize time keeps the fuzzer from stalling on a new input.
# Go 1.26's fuzz coordinator can miss its own -fuzztime deadline and fail
# the target with a bare "context deadline exceeded" and no input found
# (go.dev/issue/75804, fixed in Go 1.27); a loaded make test met it once.
# A real finding always writes its input under testdata/fuzz/<target>:
# only a run that wrote none and printed nothing but that error passes.
if ((rc == 0)) && [[ ${pkgs[*]} == ./... && -z ${MAYFLY_SKIP_FUZZ:-} ]]; then
	for target in ingest:FuzzParse ingest:FuzzSimple ingest:FuzzSanitize edge:FuzzRequest; do
		pkg=${target%%:*} name=${target#*:}
		corpus="$pkg/testdata/fuzz/$name"
		before=$(ls "$corpus" 2>/dev/null)
		log="$MAYFLY_CLUSTER_DIR/fuzz-$name.log"
		MAYFLY_TEST_REDIS_ADDRS=$addrs go test "./$pkg" -run '^$' -fuzz "^$name\$" \
			-fuzztime "${MAYFLY_FUZZTIME:-10s}" -fuzzminimizetime 5s 2>&1 | tee "$log"
		frc=${PIPESTATUS[0]}
		((frc != 0)) || continue
		if [[ $(ls "$corpus" 2>/dev/null) == "$before" ]] && fuzz_deadline_race "$log"; then
			echo "test.sh: $name: the fuzz coordinator missed its -fuzztime deadline with no input found (go.dev/issue/75804); not a finding"
			continue
		fi
		rc=$frc
		break
	done
fi
set -e
exit "$rc"

#!/usr/bin/env bash
# bench/run.sh [full|tiny] — `make bench` (full) and `make bench-smoke` (tiny).
#
# Installs what is missing (deploy/install-deps.sh), builds bin/mayfly and the
# load tools of bench/ (k6 and vegeta at the versions pinned in bench/go.mod),
# starts a throwaway 3-master Redis Cluster and a second one of 3 primaries
# with a replica each (AR and DR: the production shape), runs
# bench/cmd/benchrun against them and always tears both down. benchrun
# starts and stops the mayfly nodes and the reference servers itself.
# Mailpit and Inbucket (the peers of D, and Inbucket's list A's, pinned in
# bench/peers/go.mod) are built from the Go module proxy when they can be; a
# failed build only leaves the peer out.
#
# full replaces its sections of bench/RESULTS.md (one per scenario); tiny (what CI runs: every scenario once, for a
# second or two, at small sizes) writes its table to the log dir only.
# BENCH_ONLY=A,D runs some scenarios (and writes no RESULTS.md).
# BENCH_BIN: the mayfly binary to measure (default: build this checkout's),
# e.g. a build of an older commit, for a before/after in one window; a run
# with it writes no RESULTS.md either.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$repo/deploy/lib.sh"

scale=${1:-full}
only=${BENCH_ONLY:-}
only=",${only^^},"
[[ $scale == full || $scale == tiny ]] || die "usage: $0 [full|tiny]"

bash "$repo/deploy/install-deps.sh"

ms() { date +%s%3N; }
t0=$(ms)
cd "$repo"
bin=${BENCH_BIN:-}
if [[ -z $bin ]]; then
	go build -o bin/mayfly ./cmd/mayfly
	bin=bin/mayfly
fi
[[ -x $bin ]] || die "BENCH_BIN=$bin: not an executable"
(
	cd bench
	go build -o bin/ ./cmd/...
	go build -o bin/k6 go.k6.io/k6
	go build -o bin/vegeta github.com/tsenart/vegeta/v12
)
log "built mayfly and the load tools in $(($(ms) - t0)) ms"
# The peers: Mailpit builds with go build; Inbucket is installed with go
# install of the tool bench/peers/go.mod pins (the module proxy refuses
# `go install …@version` for it), into bench/bin.
t0=$(ms)
if (cd bench/peers && go build -o ../bin/mailpit github.com/axllent/mailpit); then
	log "built mailpit in $(($(ms) - t0)) ms"
else
	rm -f bench/bin/mailpit
	log "warning: mailpit did not build; D runs without it"
fi
t0=$(ms)
if (cd bench/peers && GOBIN="$repo/bench/bin" go install github.com/inbucket/inbucket/v3/cmd/inbucket); then
	log "installed inbucket in $(($(ms) - t0)) ms"
else
	rm -f bench/bin/inbucket
	log "warning: inbucket did not install; A and D run without it"
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-bench.XXXXXX")
MAYFLY_CLUSTER_DIR="$logs/cluster"
mkdir -p "$MAYFLY_CLUSTER_DIR"
export MAYFLY_CLUSTER_DIR

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	bash "$repo/deploy/cluster.sh" down || true
	MAYFLY_CLUSTER_DIR="$logs/cluster-r" bash "$repo/deploy/cluster.sh" down || true
	log "logs and tool output kept in $logs"
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

addrs=$(bash "$repo/deploy/cluster.sh" up)
log "cluster $addrs up"
raddrs=
if [[ $only == ",," || $only == *,AR,* || $only == *,DR,* || $only == *,RAR,* ]]; then
	mkdir -p "$logs/cluster-r"
	raddrs=$(MAYFLY_CLUSTER_DIR="$logs/cluster-r" MAYFLY_CLUSTER_REPLICAS=1 bash "$repo/deploy/cluster.sh" up)
	log "replicated cluster $raddrs up"
fi

# 10,000 event streams need as many descriptors in the edge and the load tool.
# F50 (50,000 streams, only when asked for) needs about 110,000: a root
# shell may raise the hard limit.
if [[ $only == *,F50,* ]] && (($(ulimit -Hn) < 120000)); then
	ulimit -Hn 120000 2>/dev/null || log "warning: cannot raise the descriptor limit to 120000 for F50"
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
(($(ulimit -n) >= 12000)) || log "warning: ulimit -n is $(ulimit -n); scenario F needs about 10,100 descriptors"

out=
[[ $scale == full && -z ${BENCH_ONLY:-} && -z ${BENCH_RUNS:-} && -z ${BENCH_BIN:-} ]] && out=bench/RESULTS.md
bench/bin/benchrun -redis "$addrs" ${raddrs:+-redis-replicated "$raddrs"} -mayfly "$bin" -tools bench/bin -scale "$scale" \
	-logs "$logs" -out "$out" ${BENCH_ONLY:+-only "$BENCH_ONLY"} ${BENCH_PROFILE:+-profile} ${BENCH_RUNS:+-runs "$BENCH_RUNS"}

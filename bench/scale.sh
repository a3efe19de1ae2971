#!/usr/bin/env bash
# bench/scale.sh — `make bench-scale`: Mayfly at SCALE_N live inboxes
# (default 1,000,000), measured in one run (bench/README.md, "Scale").
#
# Starts a throwaway 3-primary Redis Cluster (deploy/cluster.sh, with the
# Redis settings of deploy/README.md), one `mayfly edge` and one `mayfly
# ingest` on free loopback ports, and runs bench/cmd/scalerun against them:
# the memory model (Redis's defaults against ours, in the same run), the
# fill to SCALE_N with measurements at 1,000 / 100,000 / SCALE_N, and the
# mass expiry. Replaces its section of bench/RESULTS.md (SCALE_OUT= writes
# them to the log dir only). Refuses to start when the machine has too
# little free memory for SCALE_N. Always tears everything down.
#
# SCALE_SMOKE=1 (what `make bench-smoke` runs, at SCALE_N=20000): the memory
# model of the deployed settings only, lifetimes not spread, no RESULTS.md.
# SCALE_MEMORY_ONLY=1: the memory model only (a few minutes), to price a
# change. SCALE_MEM_SAMPLE (default 10000) inboxes a step of the memory
# model: fewer make its per-IP figure noisy (it is a difference of two).
# SCALE_BIN: the mayfly binary to measure (default: build this checkout's),
# e.g. a build of an older commit for a before/after; such a run writes to
# the log dir only unless SCALE_OUT names a file.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$repo/deploy/lib.sh"

# Everything runs inside main, which bash has read whole before it starts:
# editing this file during a run (it lasts a while) cannot derail it.
main() {

n=${SCALE_N:-1000000}
smoke=${SCALE_SMOKE:-}
[[ $n =~ ^[0-9]+$ ]] && ((n >= 2000)) || die "SCALE_N=$n: want a whole number of at least 2000"
out=${SCALE_OUT-bench/RESULTS.md}
[[ -z $smoke && -z ${SCALE_BIN:-} ]] || out=${SCALE_OUT:-}

# Memory: ~4.2 KB of used_memory per inbox with its message and IP share,
# ~5.5 KB of RSS (make bench-scale, RESULTS.md), plus ~1.5 GiB for the
# nodes, the load tool and the memory model.
need_kib=$((n * 55 / 10 + 1536 * 1024))
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if ((avail_kib < need_kib)); then
	die "SCALE_N=$n needs about $((need_kib / 1024)) MiB of free memory (~5.5 KB an inbox + 1.5 GiB); this machine has $((avail_kib / 1024)) MiB available. Run a smaller SCALE_N (e.g. SCALE_N=100000)."
fi
log "SCALE_N=$n: about $((need_kib / 1024)) MiB needed, $((avail_kib / 1024)) MiB available"

bash "$repo/deploy/install-deps.sh"
cd "$repo"
bin=${SCALE_BIN:-}
if [[ -z $bin ]]; then
	go build -o bin/mayfly ./cmd/mayfly
	bin=bin/mayfly
fi
[[ -x $bin ]] || die "SCALE_BIN=$bin: not an executable"
(cd bench && go build -o bin/scalerun ./cmd/scalerun)

logs=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-scale.XXXXXX")
MAYFLY_CLUSTER_DIR="$logs/cluster"
mkdir -p "$MAYFLY_CLUSTER_DIR"
export MAYFLY_CLUSTER_DIR
pids=()

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	bash "$repo/deploy/cluster.sh" down || true
	log "logs kept in $logs"
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

addrs=$(bash "$repo/deploy/cluster.sh" up)
log "cluster $addrs up"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# The nodes: every limit at its default but the global creation cap, raised
# as deploy/README.md says for this many live inboxes; the load tool
# forwards client addresses from 127.0.0.1, a trusted proxy.
export MAYFLY_REDIS_ADDRS=$addrs MAYFLY_TRUSTED_PROXIES=127.0.0.1/32 MAYFLY_COOKIE_SECURE=false
export MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE=1000000 MAYFLY_ADMIN_PPROF=off
# The nodes listen on ports the kernel picks (:0) and log them: ports
# drawn first and bound later could be drawn twice, or taken meanwhile.
MAYFLY_HTTP_ADDR=127.0.0.1:0 MAYFLY_ADMIN_ADDR=127.0.0.1:0 MAYFLY_LOG_LEVEL=info \
	"$bin" edge 2>"$logs/edge.log" &
pids+=($!)
MAYFLY_SMTP_ADDR=127.0.0.1:0 MAYFLY_ADMIN_ADDR=127.0.0.1:0 MAYFLY_LOG_LEVEL=info \
	"$bin" ingest 2>"$logs/ingest.log" &
pids+=($!)
# listening FILE KIND: the address of the node's "listening" line of KIND.
listening() {
	sed -n 's/.*"msg":"listening","kind":"'"$2"'","addr":"\([^"]*\)".*/\1/p' "$1" | head -n 1
}
http_addr= smtp_addr=
for ((i = 0; i < 100; i++)); do
	http_addr=$(listening "$logs/edge.log" http) smtp_addr=$(listening "$logs/ingest.log" smtp)
	[[ -n $http_addr && -n $smtp_addr ]] && break
	sleep 0.1
done
[[ -n $http_addr && -n $smtp_addr ]] || die "the nodes did not start; see $logs/edge.log and $logs/ingest.log"
if grep -h '"redis setting differs' "$logs/edge.log" "$logs/ingest.log"; then
	die "the cluster does not have the Redis settings of deploy/README.md"
fi

profiles="Redis's defaults=hash-max-listpack-value:64,hash-max-listpack-entries:512,stream-node-max-bytes:4096;deploy/README.md's Redis settings="
args=(-n "$n" -mem-sample "${SCALE_MEM_SAMPLE:-10000}")
if [[ -n $smoke ]]; then
	profiles="deploy/README.md's Redis settings="
	args+=(-spread 0 -mem-sample 1000)
fi
[[ -z ${SCALE_MEMORY_ONLY:-} ]] || args+=(-memory-only)
# SCALE_EXPIRE_AT (e.g. 45m): when the population expires, from the fill's
# start, instead of a minute after the fill's expected end: on a machine
# whose speed varies, an estimate made early lets the first inboxes expire
# before the fill ends.
[[ -z ${SCALE_EXPIRE_AT:-} ]] || args+=(-expire-at "$SCALE_EXPIRE_AT")
label="Commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/RESULTS.md' || echo ' (with local changes)')${SCALE_BIN:+, measuring the binary $SCALE_BIN}, $(nproc) cores shared by everything (Redis, nodes, load tool), redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')."
bench/bin/scalerun -redis "$addrs" -api "http://$http_addr/v1" -smtp "$smtp_addr" \
	-profiles "$profiles" -label "$label" -out "${out:-$logs/results.md}" "${args[@]}" | tee "$logs/scale.md"
}

main "$@"

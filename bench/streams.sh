#!/usr/bin/env bash
# bench/streams.sh — `make bench-streams`: bench F at scale (bench/README.md,
# "F at scale"): STREAMS_N idle event streams (default 10,000) across as many
# edge processes as STREAMS_PER_EDGE (default 25,000) asks for, each edge
# with its own sseload, on a throwaway 3-primary Redis Cluster and one
# ingest node. Per edge and in total: RSS, Go heap and stacks, goroutines
# per stream; idle CPU per stream per second of the edges and of Redis over
# STREAMS_IDLE (default 30s); SMTP 250 → event p50/p99 at STREAMS_RATE msgs/s
# (default 200, shared out) for STREAMS_RUNS runs of 5 s; then, unless
# STREAMS_STORM=0, the restart storm: every edge is killed (SIGKILL) and
# started again on its address while its clients reconnect as the official
# clients do (retry:, Retry-After), and how long until every stream is open
# again.
#
# STREAMS_BIN: the mayfly binary to measure (default: build this checkout's),
# e.g. a build of main for a before/after. Raises the descriptor limit as
# root (each edge needs one per stream, its load process another); as
# another user the hard limit must fit STREAMS_PER_EDGE. Prints one JSON
# line per edge (sseload's, with "edge") and a summary table; logs stay in
# a temporary directory. Always tears everything down.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$repo/deploy/lib.sh"

main() {

n=${STREAMS_N:-10000}
idle=${STREAMS_IDLE:-30s}
rate=${STREAMS_RATE:-200}
runs=${STREAMS_RUNS:-3}
storm=${STREAMS_STORM:-1}
# One descriptor per stream in the edge and one in its load process, and
# 1,024 to spare. As root the hard limit is raised where the kernel lets
# us; an edge takes at most what the hard limit then fits (a container
# without CAP_SYS_RESOURCE keeps its limit: this machine's is 20,000), and
# as many edges run as the streams need.
if ((EUID == 0)); then
	ulimit -Hn $((${STREAMS_PER_EDGE:-25000} + 1024)) 2>/dev/null || true
fi
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=1048576
per=${STREAMS_PER_EDGE:-$((hard - 1024 < 25000 ? hard - 1024 : 25000))}
[[ $n =~ ^[0-9]+$ && $per =~ ^[0-9]+$ ]] && ((n >= 1 && per >= 1)) || die "STREAMS_N=$n STREAMS_PER_EDGE=$per: want whole numbers"
((per + 1024 <= hard)) || die "STREAMS_PER_EDGE=$per needs $((per + 1024)) descriptors; the hard limit is $hard"
edges=$(((n + per - 1) / per))
per=$(((n + edges - 1) / edges))
n=$((per * edges)) # every edge the same share
((edges <= 20)) || die "$edges edges: at most 20 (raise the descriptor limit)"
ulimit -n "$hard"

bash "$repo/deploy/install-deps.sh"
cd "$repo"
bin=${STREAMS_BIN:-}
if [[ -z $bin ]]; then
	go build -o bin/mayfly ./cmd/mayfly
	bin=$repo/bin/mayfly
fi
(cd bench && go build -o bin/sseload ./cmd/sseload)

logs=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-streams.XXXXXX")
MAYFLY_CLUSTER_DIR="$logs/cluster"
mkdir -p "$MAYFLY_CLUSTER_DIR"
export MAYFLY_CLUSTER_DIR
pids=()
loads=()

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${loads[@]}" "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${loads[@]}" "${pids[@]}"; do
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
log "cluster $addrs up; $n streams on $edges edge(s), $per each"

# The load processes bind their streams to addresses of 127.0.0.0/8 (one
# address has ~28,000 ports towards a listener), so the edges trust all of
# it as proxies: the per-client caps count the X-Forwarded-For clients.
export MAYFLY_REDIS_ADDRS=$addrs MAYFLY_REDIS_PREFIX=mf MAYFLY_DOMAINS=mayfly.test MAYFLY_COOKIE_SECURE=false
export MAYFLY_TRUSTED_PROXIES=127.0.0.0/8 MAYFLY_ADMIN_PPROF=off MAYFLY_LOG_LEVEL=info
export MAYFLY_HTTP_MAX_CONNS=$((per + 1024)) MAYFLY_MAX_STREAMS=$((per + 1024))

# listening FILE KIND: the address of the node's "listening" line of KIND.
listening() {
	sed -n 's/.*"msg":"listening","kind":"'"$2"'","addr":"\([^"]*\)".*/\1/p' "$1" | tail -n 1
}
# await FILE KIND: wait for the node to log its address of KIND.
await() {
	local a i
	for ((i = 0; i < 200; i++)); do
		a=$(listening "$1" "$2")
		[[ -n $a ]] && { echo "$a"; return; }
		sleep 0.05
	done
	die "no $2 address in $1"
}

MAYFLY_SMTP_ADDR=127.0.0.1:0 MAYFLY_ADMIN_ADDR=127.0.0.1:0 "$bin" ingest 2>"$logs/ingest.log" &
pids+=($!)
smtp=$(await "$logs/ingest.log" smtp)

declare -a epid ehttp eadmin
for ((k = 0; k < edges; k++)); do
	MAYFLY_HTTP_ADDR=127.0.0.1:0 MAYFLY_ADMIN_ADDR=127.0.0.1:0 "$bin" edge 2>"$logs/edge$k.log" &
	epid[k]=$! pids+=($!)
	ehttp[k]=$(await "$logs/edge$k.log" http)
	eadmin[k]=$(await "$logs/edge$k.log" admin)
done

srate=$(awk -v r="$rate" -v e="$edges" 'BEGIN { printf "%g", r / e }')
for ((k = 0; k < edges; k++)); do
	args=(-api "http://${ehttp[k]}/v1" -smtp "$smtp" -redis "$addrs" -prefix mf -make "$per"
		-bind "127.$((40 + k)).0.0/16" -src "127.$((10 + k)).0.0/16" -ip-base $((k * per))
		-rss-pid "${epid[k]}" -metrics "http://${eadmin[k]}/metrics" -idle "$idle"
		-rate "$srate" -runs "$runs" -duration 5s -wait 5s -settle 3s)
	if [[ $storm != 0 ]]; then
		args+=(-reconnect -storm 120s -ready "$logs/ready$k")
	fi
	bench/bin/sseload "${args[@]}" >"$logs/sseload$k.json" 2>"$logs/sseload$k.log" &
	loads+=($!)
done

if [[ $storm != 0 ]]; then
	for ((k = 0; k < edges; k++)); do
		while [[ ! -e $logs/ready$k ]]; do
			kill -0 "${loads[k]}" 2>/dev/null || die "sseload $k ended early: $(tail -n 3 "$logs/sseload$k.log")"
			sleep 0.5
		done
	done
	log "restart storm: killing and restarting $edges edge(s) under $n streams"
	for ((k = 0; k < edges; k++)); do
		kill -KILL "${epid[k]}"
	done
	for ((k = 0; k < edges; k++)); do
		wait "${epid[k]}" 2>/dev/null || true
		MAYFLY_HTTP_ADDR=${ehttp[k]} MAYFLY_ADMIN_ADDR=127.0.0.1:0 "$bin" edge 2>>"$logs/edge$k.log" &
		epid[k]=$! pids+=($!)
	done
fi
for ((k = 0; k < edges; k++)); do
	wait "${loads[k]}" || die "sseload $k failed: $(tail -n 3 "$logs/sseload$k.log")"
done
loads=()

for ((k = 0; k < edges; k++)); do
	jq -c --argjson k "$k" '. + {edge: $k}' "$logs/sseload$k.json"
done | tee "$logs/all.json"
# The summary: memory and idle CPU from each edge's first line, latency
# over every run, the storm from each edge's last line.
jq -rs --argjson n "$n" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '
	def firsts: group_by(.edge) | map(.[0]);
	def lasts: group_by(.edge) | map(.[-1]);
	def sum(f): map(f // 0) | add;
	def mx(f): map(f // 0) | max;
	(firsts) as $f | (lasts) as $l |
	"| streams open | \(($f | sum(.extra.streams - .extra.open_errors))) of \($n) on \($f | length) edge(s) |",
	"| edge RSS with them open (sum) | \(($f | sum(.extra.rss_after_mib)) | floor) MiB |",
	"| RSS per stream | \((($f | sum(.extra.rss_after_mib - .extra.rss_before_mib)) * 1024 / $n) * 10 | round / 10) KiB |",
	"| Go heap in use per stream | \(($f | sum(.extra.heap_kib_per_stream * .extra.streams)) / $n * 10 | round / 10) KiB |",
	"| goroutine stacks per stream | \(($f | sum(.extra.stack_kib_per_stream * .extra.streams)) / $n * 10 | round / 10) KiB |",
	"| goroutines per stream | \(($f | sum(.extra.goroutines_per_stream * .extra.streams)) / $n * 100 | round / 100) |",
	"| idle edge CPU (sum) | \(($f | sum(.extra.idle_edge_cores)) * 1000 | round / 1000) cores, \(($f | sum(.extra.idle_edge_us_per_stream_s * .extra.streams)) / $n * 100 | round / 100) µs per stream per second; net of the edge with no stream (\(($f | sum(.extra.baseline_edge_cores)) * 1000 | round / 1000) cores): \(($f | sum(.extra.idle_edge_net_us_per_stream_s * .extra.streams)) / $n * 100 | round / 100) µs |",
	"| idle Redis CPU (first load process'\''s window) | \($f[0].extra.idle_redis_cores * 1000 | round / 1000) cores, \($f[0].extra.idle_redis_cores * 1e6 / $n * 100 | round / 100) µs per stream per second |",
	"| SMTP 250 → event p50 / p99 (worst edge and run) | \(mx(.p50_ms)) / \(mx(.p99_ms)) ms |",
	"| missing events, errors | \(sum(.extra.missing_events)), \(sum(.errors)) |",
	(if ($l[0].extra.storm_breaks // null) != null then
	"| restart storm: every stream back after | \($l | mx(.extra.storm_seconds) * 100 | round / 100) s (outage p50 \($l | mx(.extra.storm_outage_p50_s) * 100 | round / 100) s, max \($l | mx(.extra.storm_outage_max_s) * 100 | round / 100) s) |",
	"| storm: breaks, back, not back, 503s, other failed attempts | \($l | sum(.extra.storm_breaks)), \($l | sum(.extra.storm_back)), \($l | sum(.extra.storm_not_back)), \($l | sum(.extra.storm_503)), \($l | sum(.extra.storm_failed_attempts)) |"
	else empty end),
	"| load average (1, 5, 15 min) at the end | \($load) |"
' "$logs/all.json" | tee "$logs/summary.md"
}

main "$@"

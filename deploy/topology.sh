#!/usr/bin/env bash
# topology.sh up|down DIR|restart DIR KIND N|demo — Mayfly as it is meant to run, on loopback:
# a Redis Cluster of 3 primaries + 3 replicas (cluster-node-timeout 2 s),
# 2 `mayfly edge` + 2 `mayfly ingest` nodes, and haproxy in front of them
# with deploy/haproxy/haproxy.cfg (HTTP for the API, TCP + PROXY v2 for SMTP).
#
#   up       starts everything in the background and prints the state dir
#            ($MAYFLY_TOPOLOGY_DIR, or a new temp dir). The dir holds every
#            log and topology.env, KEY=VALUE lines for tools and tests:
#            HTTP_URL SMTP_ADDR HAPROXY_PID HAPROXY_SOCKET (its runtime
#            API) REDIS_ADDRS,
#            EDGE<i>_PID EDGE<i>_HTTP EDGE<i>_ADMIN (i = 1, 2),
#            INGEST<i>_PID INGEST<i>_SMTP INGEST<i>_ADMIN.
#   down DIR stops everything recorded in DIR and removes it.
#   restart DIR edge|ingest N
#            stops node N of that kind (SIGTERM, as a rollout does; SIGKILL
#            if it still runs 20 s later) and starts it again on the
#            same ports, so haproxy keeps it as its backend: MAYFLY_BIN (a
#            binary of another release) and the MAYFLY_* variables of this
#            call's environment apply to the new process. It prints the new
#            PID and adds it to topology.env (the last EDGE<i>_PID line is the
#            live one).
#   demo     `up` with the dev profile of make run (deploy/dev.env, unless
#            MAYFLY_RUN_PROFILE=spec), prints the addresses and a quick start,
#            and tears it all down on Ctrl-C (make cluster-demo).
#
# MAYFLY_CLUSTER_REPLICAS (default 1) gives each primary that many replicas
# (the two-replica partition drill runs 2). MAYFLY_BIN names the binary (default: make build, then bin/mayfly);
# MAYFLY_HAPROXY_CFG another haproxy configuration (default:
# deploy/haproxy/haproxy.cfg; the flood drill compares against an old one).
# The MAYFLY_LB_* limits of haproxy.cfg come from the environment too. Any
# MAYFLY_* variable in the environment reaches every node, so a caller can
# tune a setting (e.g. MAYFLY_RATE_REQUESTS_PER_SECOND for a load test).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$here/lib.sh"

usage() { die "usage: $0 up | down DIR | restart DIR edge|ingest N | demo"; }

# wait_ready URL PID: waits until URL answers 200 (a node's /readyz), failing
# when PID exits first or after 20 s.
wait_ready() {
	local url=$1 pid=$2 i
	for ((i = 0; i < 200; i++)); do
		pid_alive "$pid" || return 1
		curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# launch_node DIR KIND N MAIN_PORT ADMIN_PORT: starts `mayfly KIND` as node
# N on those ports and records its PID in DIR/pids and in $pid.
launch_node() {
	local dir=$1 kind=$2 n=$3 main_port=$4 admin_port=$5
	if [[ $kind == edge ]]; then
		MAYFLY_HTTP_ADDR=127.0.0.1:$main_port MAYFLY_ADMIN_ADDR=127.0.0.1:$admin_port \
			"$bin" edge >>"$dir/$kind$n.log" 2>&1 </dev/null &
	else
		MAYFLY_SMTP_ADDR=127.0.0.1:$main_port MAYFLY_ADMIN_ADDR=127.0.0.1:$admin_port \
			"$bin" ingest >>"$dir/$kind$n.log" 2>&1 </dev/null &
	fi
	pid=$!
	printf '%s\n' "$pid" >>"$dir/pids"
}

# start_node DIR KIND N: starts `mayfly KIND` as node N on free ports and
# records it in DIR/topology.env.
start_node() {
	local dir=$1 kind=$2 n=$3 upper main_port admin_port pid tries
	upper=$(tr '[:lower:]' '[:upper:]' <<<"$kind")
	for ((tries = 0; tries < 10; tries++)); do
		main_port=$(random_port)
		admin_port=$(random_port)
		((main_port != admin_port)) || continue
		launch_node "$dir" "$kind" "$n" "$main_port" "$admin_port"
		if wait_ready "http://127.0.0.1:$admin_port/readyz" "$pid"; then
			{
				printf '%s%s_PID=%s\n' "$upper" "$n" "$pid"
				if [[ $kind == edge ]]; then
					printf '%s%s_HTTP=127.0.0.1:%s\n' "$upper" "$n" "$main_port"
				else
					printf '%s%s_SMTP=127.0.0.1:%s\n' "$upper" "$n" "$main_port"
				fi
				printf '%s%s_ADMIN=127.0.0.1:%s\n' "$upper" "$n" "$admin_port"
			} >>"$dir/topology.env"
			return 0
		fi
		log "$kind $n did not become ready (port taken?); trying other ports"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	die "could not start mayfly $kind; see $dir/$kind$n.log"
}

# env_get DIR KEY: a value from DIR/topology.env (its last line).
env_get() { sed -n "s/^$2=//p" "$1/topology.env" | tail -n 1; }

# node_env ADDRS: the settings every mayfly node of the topology gets, on
# top of the caller's MAYFLY_* variables.
node_env() {
	export MAYFLY_REDIS_ADDRS=$1
	export MAYFLY_COOKIE_SECURE=${MAYFLY_COOKIE_SECURE:-false}
	export MAYFLY_TRUSTED_PROXIES=${MAYFLY_TRUSTED_PROXIES:-127.0.0.1/32}
	export MAYFLY_SMTP_PROXY_PROTOCOL_FROM=${MAYFLY_SMTP_PROXY_PROTOCOL_FROM:-127.0.0.1/32}
	export MAYFLY_DOMAINS=${MAYFLY_DOMAINS:-mayfly.test}
}

# cmd_restart DIR KIND N: see the usage at the top.
cmd_restart() {
	local dir=${1:-} kind=${2:-} n=${3:-} upper old main admin pid i
	[[ -d $dir && ($kind == edge || $kind == ingest) && ($n == 1 || $n == 2) ]] || usage
	dir=$(cd "$dir" && pwd)
	upper=$(tr '[:lower:]' '[:upper:]' <<<"$kind")
	old=$(env_get "$dir" "$upper${n}_PID")
	main=$(env_get "$dir" "$upper${n}_$([[ $kind == edge ]] && echo HTTP || echo SMTP)")
	admin=$(env_get "$dir" "$upper${n}_ADMIN")
	[[ -n $old && -n $main && -n $admin ]] || die "$dir/topology.env has no $kind $n"
	kill -TERM "$old" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		pid_alive "$old" || break
		sleep 0.1
	done
	if pid_alive "$old"; then
		log "$kind $n ($old) still running after SIGTERM; killing it"
		kill -KILL "$old" 2>/dev/null || true
	fi
	if [[ -n ${MAYFLY_BIN:-} ]]; then
		bin=$MAYFLY_BIN
	else
		bin=$repo/bin/mayfly
	fi
	node_env "$(env_get "$dir" REDIS_ADDRS)"
	# The old process's sockets may take a moment to be released.
	for ((i = 0; i < 5; i++)); do
		launch_node "$dir" "$kind" "$n" "${main##*:}" "${admin##*:}"
		if wait_ready "http://$admin/readyz" "$pid"; then
			printf '%s%s_PID=%s\n' "$upper" "$n" "$pid" >>"$dir/topology.env"
			log "$kind $n restarted as $pid ($bin)"
			printf '%s\n' "$pid"
			return 0
		fi
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		sleep 0.5
	done
	die "could not restart mayfly $kind $n on $main; see $dir/$kind$n.log"
}

cmd_down() {
	local dir=${1:-} pid
	[[ -n $dir ]] || usage
	[[ -d $dir ]] || { log "$dir: no such topology"; return 0; }
	dir=$(cd "$dir" && pwd)
	if [[ -f $dir/pids ]]; then
		while read -r pid; do
			[[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
		done <"$dir/pids"
		# Nodes drain (MAYFLY_DRAIN_DELAY, 5 s: their /readyz is 503 while
		# they serve on), then finish what is in flight; past 10 s, kill.
		for _ in $(seq 100); do
			local alive=
			while read -r pid; do
				[[ -n $pid ]] && pid_alive "$pid" && alive=1
			done <"$dir/pids"
			[[ -z $alive ]] && break
			sleep 0.1
		done
		while read -r pid; do
			[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
		done <"$dir/pids"
	fi
	MAYFLY_CLUSTER_DIR=$dir/redis bash "$here/cluster.sh" down
	rm -rf -- "$dir"
	log "topology in $dir is down"
}

up_failed() {
	local rc=$?
	trap - EXIT INT TERM
	if ((rc != 0)); then
		log "up failed; logs were in $dir, cleaning up"
		tail -n 20 "$dir"/*.log >&2 2>/dev/null || true
		cmd_down "$dir"
	fi
	exit "$rc"
}

cmd_up() {
	bash "$here/install-deps.sh"
	if [[ -n ${MAYFLY_BIN:-} ]]; then
		bin=$MAYFLY_BIN
	else
		make -C "$repo" --no-print-directory build >&2
		bin=$repo/bin/mayfly
	fi
	if [[ -n ${MAYFLY_TOPOLOGY_DIR:-} ]]; then
		dir=$MAYFLY_TOPOLOGY_DIR
		mkdir -p -- "$dir"
	else
		dir=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-topology.XXXXXX")
	fi
	dir=$(cd "$dir" && pwd)
	: >"$dir/topology.env"
	: >"$dir/pids"
	trap up_failed EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	local addrs lb_http lb_smtp pid i
	addrs=$(MAYFLY_CLUSTER_DIR=$dir/redis MAYFLY_CLUSTER_REPLICAS=${MAYFLY_CLUSTER_REPLICAS:-1} MAYFLY_CLUSTER_NODE_TIMEOUT=2000 \
		bash "$here/cluster.sh" up)
	printf 'REDIS_ADDRS=%s\n' "$addrs" >>"$dir/topology.env"

	node_env "$addrs"
	for i in 1 2; do
		start_node "$dir" edge "$i"
		start_node "$dir" ingest "$i"
	done

	for ((i = 0; i < 10; i++)); do
		lb_http=$(random_port)
		lb_smtp=$(random_port)
		((lb_http != lb_smtp)) || continue
		MAYFLY_LB_HTTP=127.0.0.1:$lb_http MAYFLY_LB_SMTP=127.0.0.1:$lb_smtp MAYFLY_LB_ADMIN_SOCKET=$dir/haproxy.sock \
			MAYFLY_EDGE1_HTTP=$(env_get "$dir" EDGE1_HTTP) MAYFLY_EDGE1_ADMIN=$(env_get "$dir" EDGE1_ADMIN | cut -d: -f2) \
			MAYFLY_EDGE2_HTTP=$(env_get "$dir" EDGE2_HTTP) MAYFLY_EDGE2_ADMIN=$(env_get "$dir" EDGE2_ADMIN | cut -d: -f2) \
			MAYFLY_INGEST1_SMTP=$(env_get "$dir" INGEST1_SMTP) MAYFLY_INGEST1_ADMIN=$(env_get "$dir" INGEST1_ADMIN | cut -d: -f2) \
			MAYFLY_INGEST2_SMTP=$(env_get "$dir" INGEST2_SMTP) MAYFLY_INGEST2_ADMIN=$(env_get "$dir" INGEST2_ADMIN | cut -d: -f2) \
			haproxy -db -f "${MAYFLY_HAPROXY_CFG:-$here/haproxy/haproxy.cfg}" >>"$dir/haproxy.log" 2>&1 </dev/null &
		pid=$!
		printf '%s\n' "$pid" >>"$dir/pids"
		# Ready when a request through it reaches an edge (a 404 for an
		# unknown path is an answer). haproxy binds every frontend before it
		# serves any, so SMTP is up too; it is not probed, since a probe
		# would count against 127.0.0.1's SMTP connection limit.
		local ok=
		for ((j = 0; j < 100; j++)); do
			pid_alive "$pid" || break
			if curl -s -o /dev/null --max-time 1 -w '%{http_code}' "http://127.0.0.1:$lb_http/v1/healthz-probe" 2>/dev/null | grep -Eqv '^(000|503)$'; then
				ok=1
				break
			fi
			sleep 0.1
		done
		[[ -n $ok ]] && break
		log "haproxy did not start on $lb_http/$lb_smtp (port taken?); trying others"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	done
	[[ -n $pid ]] || die "could not start haproxy; see $dir/haproxy.log"
	{
		printf 'HAPROXY_PID=%s\n' "$pid"
		printf 'HAPROXY_SOCKET=%s\n' "$dir/haproxy.sock"
		printf 'HTTP_URL=http://127.0.0.1:%s/v1\n' "$lb_http"
		printf 'SMTP_ADDR=127.0.0.1:%s\n' "$lb_smtp"
	} >>"$dir/topology.env"
	trap - EXIT INT TERM
	log "topology up in $dir"
	printf '%s\n' "$dir"
}

cmd_demo() {
	local dir http smtp
	profile_note=
	load_profile "${MAYFLY_RUN_PROFILE:-dev}" # as make run: the dev profile unless spec
	dir=$(cmd_up)
	trap 'cmd_down "$dir"; exit 0' INT TERM
	http=$(env_get "$dir" HTTP_URL)
	smtp=$(env_get "$dir" SMTP_ADDR)
	cat <<EOF

Mayfly, production shape, on loopback (state and logs in $dir):
  API   $http   (haproxy → edge $(env_get "$dir" EDGE1_HTTP), $(env_get "$dir" EDGE2_HTTP))
  SMTP  $smtp   (haproxy, PROXY v2 → ingest $(env_get "$dir" INGEST1_SMTP), $(env_get "$dir" INGEST2_SMTP))
  Redis $(env_get "$dir" REDIS_ADDRS)
        (3 primaries + 3 replicas, cluster-node-timeout 2 s)
$profile_note
  admin edge $(env_get "$dir" EDGE1_ADMIN) $(env_get "$dir" EDGE2_ADMIN), ingest $(env_get "$dir" INGEST1_ADMIN) $(env_get "$dir" INGEST2_ADMIN)

Quick start (<id> and <address> come from the first reply):
  curl -s -c jar -b jar -X POST -H 'Content-Type: application/json' -d '{}' $http/mailboxes
  curl -s -c jar -b jar -X POST $http/mailboxes/<id>/select
  swaks --server $smtp --to <address> --header 'Subject: hello' --body 'your code is 123456'
  curl -s -c jar -b jar $http/messages
  curl -s -N -c jar -b jar $http/events

Try a failure: kill -9 one edge ($(env_get "$dir" EDGE1_PID)) or a Redis primary, and keep going.
Ctrl-C stops everything.

EOF
	while :; do sleep 1; done
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down "${2:-}" ;;
restart) cmd_restart "${2:-}" "${3:-}" "${4:-}" ;;
demo) cmd_demo ;;
*) usage ;;
esac

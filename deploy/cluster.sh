#!/usr/bin/env bash
# cluster.sh up|down|addrs|node — a throwaway 3-master Redis Cluster on loopback for
# tests and local runs. Nothing is saved to disk that outlives `down`.
#
# MAYFLY_CLUSTER_REPLICAS (default 0) gives each primary that many replicas
# (deploy/topology.sh uses 1 unless it is set; 2 runs the two-replica
# partition drill); MAYFLY_CLUSTER_NODE_TIMEOUT (ms, default 5000)
# is cluster-node-timeout, how long a node may be silent before it is failed
# over. MAYFLY_CLUSTER_CGROUP, a directory in the cgroup v2 hierarchy (root
# only), starts each node in a cgroup of its own, $MAYFLY_CLUSTER_CGROUP/
# node-<port>, so that `iptables -m cgroup --path` matches every socket the
# node ever opens (the partition drill of deploy/README.md); `down` removes
# them.
#
# A cluster like a managed Redis (AUTH and TLS):
#   MAYFLY_CLUSTER_PASSWORD   every node gets requirepass and masterauth (from
#                             a mode-600 config file in the dir, not the
#                             command line); redis-cli gets it in REDISCLI_AUTH.
#   MAYFLY_CLUSTER_TLS_DIR    a dir holding ca.crt, redis.crt and redis.key (a
#                             CA and a certificate for 127.0.0.1 signed by it,
#                             usable for server and client auth; tests make
#                             them with storagetest.WriteCerts, by hand:
#                             go run ./storage/storagetest/gencerts DIR). Each
#                             node then listens with TLS only (--port 0
#                             --tls-port), and the cluster bus and replication
#                             use TLS too; clients need not present a
#                             certificate (tls-auth-clients optional).
# `down` and `addrs` need neither.
#
# Where the cluster lives:
#   MAYFLY_CLUSTER_DIR set:   that directory holds the nodes' data, pidfiles,
#                             logs and the addrs file. Use this when several
#                             clusters may be up at once (make test does).
#   MAYFLY_CLUSTER_DIR unset: `up` makes a fresh temp dir and records its path
#                             in .cluster/state in the repo, which `down` and
#                             `addrs` read.
#
# `up` prints the comma-separated addresses on stdout (progress goes to
# stderr). `down` stops every node it can find in the dir (pidfiles and
# recorded ports, so a half-finished `up` is cleaned too) and removes the dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$here/lib.sh"

REPLICAS=${MAYFLY_CLUSTER_REPLICAS:-0}
NODE_TIMEOUT=${MAYFLY_CLUSTER_NODE_TIMEOUT:-5000}
NODES=$((3 * (1 + REPLICAS)))
state_file="$repo/.cluster/state"
if [[ -n ${MAYFLY_CLUSTER_PASSWORD:-} ]]; then
	export REDISCLI_AUTH=$MAYFLY_CLUSTER_PASSWORD
fi

usage() { die "usage: $0 up|down|addrs|node"; }

# cluster_dir: the dir of the current cluster, or nothing.
cluster_dir() {
	if [[ -n ${MAYFLY_CLUSTER_DIR:-} ]]; then
		printf '%s\n' "$MAYFLY_CLUSTER_DIR"
	elif [[ -s $state_file ]]; then
		cat "$state_file"
	fi
}

# node_pids DIR: the pid of every node of the cluster in DIR that is still
# alive, found through its pidfile or, if the pidfile was never written,
# through a recorded port whose server runs in DIR.
node_pids() {
	local dir=$1 f pid port
	{
		for f in "$dir"/redis-*.pid; do
			[[ -f $f ]] && cat "$f"
		done
		if [[ -f $dir/ports ]]; then
			while read -r port; do
				[[ -n $port ]] && redis_info_field "$port" process_id
			done <"$dir/ports"
		fi
	} | sort -u | while read -r pid; do
		pid_in_dir "$pid" "$dir" && printf '%s\n' "$pid"
	done
	return 0
}

cmd_down() {
	local dir pid
	dir=$(cluster_dir)
	if [[ -z $dir ]]; then
		log "no cluster recorded; nothing to stop"
		return 0
	fi
	if [[ -d $dir ]]; then
		# Stop them in parallel: each takes a moment to exit.
		for pid in $(node_pids "$dir"); do
			stop_pid "$pid" "$dir" &
		done
		wait
		if [[ -s $dir/cgroup ]]; then
			local cg
			cg=$(cat "$dir/cgroup")
			rmdir "$cg"/node-* "$cg" 2>/dev/null || true
		fi
		rm -rf -- "$dir"
	fi
	if [[ -z ${MAYFLY_CLUSTER_DIR:-} ]]; then
		rm -f -- "$state_file"
	fi
	log "cluster in $dir is down"
}

cmd_addrs() {
	local dir
	dir=$(cluster_dir)
	[[ -n $dir && -s $dir/addrs ]] || die "no cluster is up (run: $0 up)"
	cat "$dir/addrs"
}

# cluster_alive DIR: every recorded node still runs.
cluster_alive() {
	local dir=$1
	[[ -s $dir/addrs ]] || return 1
	[[ $(node_pids "$dir" | wc -l) -eq $NODES ]]
}

# security_args DIR: sets security (the node's config file with the password,
# and its TLS files) and listen (its client port, @PORT@ to be filled in).
security_args() {
	local dir=$1 tls=${MAYFLY_CLUSTER_TLS_DIR:-} pw f
	security=() listen=(--port @PORT@)
	if [[ -n ${MAYFLY_CLUSTER_PASSWORD:-} ]]; then
		# A quoted string in redis.conf: escape \ and ".
		pw=${MAYFLY_CLUSTER_PASSWORD//\\/\\\\}
		pw=${pw//\"/\\\"}
		(
			umask 077
			printf 'requirepass "%s"\nmasterauth "%s"\n' "$pw" "$pw" >"$dir/auth.conf"
		)
		# A config file must be redis-server's first argument.
		security=("$dir/auth.conf")
	fi
	if [[ -n $tls ]]; then
		tls=$(cd "$tls" && pwd)
		for f in ca.crt redis.crt redis.key; do
			[[ -r $tls/$f ]] || die "MAYFLY_CLUSTER_TLS_DIR: $tls/$f is missing"
		done
		listen=(--port 0 --tls-port @PORT@)
		security+=(--tls-cluster yes --tls-replication yes --tls-auth-clients optional
			--tls-cert-file "$tls/redis.crt" --tls-key-file "$tls/redis.key"
			--tls-ca-cert-file "$tls/ca.crt")
	fi
}

# start_node DIR: starts one cluster node on a free port (retrying when it
# loses a port to someone else) and prints its port.
start_node() {
	local dir=$1 port pidfile pid tries i
	for ((tries = 0; tries < 20; tries++)); do
		port=$(random_port bus)
		pidfile="$dir/redis-$port.pid"
		# Record the port before starting so `down` finds the node even if we
		# are stopped before its pidfile exists.
		printf '%s\n' "$port" >>"$dir/ports"
		local cg=
		if [[ -n ${MAYFLY_CLUSTER_CGROUP:-} ]]; then
			cg=$MAYFLY_CLUSTER_CGROUP/node-$port
			mkdir -p -- "$cg"
			printf '%s\n' "$MAYFLY_CLUSTER_CGROUP" >"$dir/cgroup"
		fi
		# A subshell joins the node's cgroup and becomes the server, whose
		# daemon child (and every socket it opens) stays in it.
		(
			[[ -z $cg ]] || printf '%s\n' "$BASHPID" >"$cg/cgroup.procs"
			exec redis-server "${security[@]}" --bind 127.0.0.1 "${redis_memory_args[@]}" \
				"${listen[@]/@PORT@/$port}" \
				--cluster-enabled yes --cluster-config-file "nodes-$port.conf" \
				--cluster-node-timeout "$NODE_TIMEOUT" \
				--cluster-replica-validity-factor 0 --repl-diskless-sync-delay 0 \
				--enable-debug-command local \
				--save '' --appendonly no \
				--daemonize yes --dir "$dir" \
				--pidfile "$pidfile" --logfile "$dir/redis-$port.log" \
				</dev/null >/dev/null 2>&1
		) || true
		pid=
		for ((i = 0; i < 50; i++)); do
			[[ -s $pidfile ]] && pid=$(cat "$pidfile") && break
			sleep 0.1
		done
		if [[ -n $pid ]] && wait_redis "$port" "$pid"; then
			printf '%s\n' "$port"
			return 0
		fi
		log "node on port $port did not start (port taken?); trying another"
		[[ -n $pid ]] && stop_pid "$pid" "$dir"
		rm -f -- "$pidfile"
	done
	die "could not start a redis-server; logs in $dir"
}

# wait_every_node CHECK PORT...: polls for up to 30 s until CHECK PORT
# succeeds for every port.
wait_every_node() {
	local check=$1 port ok i
	shift
	for ((i = 0; i < 300; i++)); do
		ok=1
		for port in "$@"; do
			if ! "$check" "$port"; then
				ok=
				break
			fi
		done
		[[ -n $ok ]] && return 0
		sleep 0.1
	done
	return 1
}

# cluster_ok_at PORT: the node sees all slots served and all $known_nodes
# nodes, which is what a client's first CLUSTER SLOTS needs.
cluster_ok_at() {
	local info
	info=$(redis_cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r')
	grep -qx 'cluster_state:ok' <<<"$info" &&
		grep -qx 'cluster_slots_ok:16384' <<<"$info" &&
		grep -qx "cluster_known_nodes:$known_nodes" <<<"$info"
}

# synced_at PORT: the node is a primary, or a replica whose link to its
# primary is up and whose first sync is done.
synced_at() {
	local info
	info=$(redis_cli -h 127.0.0.1 -p "$1" info replication 2>/dev/null | tr -d '\r')
	! grep -qx 'role:slave' <<<"$info" ||
		{ grep -qx 'master_link_status:up' <<<"$info" && grep -qx 'master_sync_in_progress:0' <<<"$info"; }
}

# roles_known_at PORT: the node's CLUSTER NODES lists $known_replicas
# replicas, each with its primary, and no node flagged failing. Replicas
# join as empty primaries and become replicas by CLUSTER REPLICATE, which
# the other nodes learn by gossip after the sync is done: until then a
# node's view names a primary without its replica, and a drill that asks a
# primary for its replicas (or a node that asks whom a write must wait
# for) finds none.
roles_known_at() {
	local nodes
	nodes=$(redis_cli -h 127.0.0.1 -p "$1" cluster nodes 2>/dev/null | tr -d '\r')
	(($(awk '$3 ~ /slave/ && $4 != "-"' <<<"$nodes" | wc -l) == known_replicas)) &&
		! awk '$3 ~ /fail/ {bad = 1} END {exit !bad}' <<<"$nodes"
}

# up_failed: the EXIT trap of `up` until the cluster is ready.
up_failed() {
	local rc=$?
	trap - EXIT INT TERM
	if ((rc != 0)); then
		log "up failed; cleaning up"
		MAYFLY_CLUSTER_DIR=$up_dir cmd_down
		[[ -n ${MAYFLY_CLUSTER_DIR:-} ]] || rm -f -- "$state_file"
	fi
	exit "$rc"
}

cmd_up() {
	local dir addrs port n ports=() hostports=() known_nodes known_replicas
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		die "redis-server and redis-cli are needed: run deploy/install-deps.sh"
	fi

	dir=$(cluster_dir)
	# An empty MAYFLY_CLUSTER_DIR made by the caller is not a stale cluster.
	if [[ -n $dir && -e $dir/ports ]]; then
		if cluster_alive "$dir"; then
			log "cluster already up in $dir"
			cat "$dir/addrs"
			return 0
		fi
		log "clearing a stale cluster in $dir"
		cmd_down
	fi

	if [[ -n ${MAYFLY_CLUSTER_DIR:-} ]]; then
		dir=$MAYFLY_CLUSTER_DIR
		mkdir -p -- "$dir"
	else
		dir=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-cluster.XXXXXX")
		mkdir -p -- "$(dirname "$state_file")"
		printf '%s\n' "$dir" >"$state_file"
	fi
	dir=$(cd "$dir" && pwd)

	# A failed or interrupted `up` leaves nothing running.
	up_dir=$dir
	trap up_failed EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	security_args "$dir"
	for ((n = 0; n < NODES; n++)); do
		port=$(start_node "$dir")
		ports+=("$port")
		hostports+=("127.0.0.1:$port")
	done
	# Only the ports that made it: `down` must not chase the ones we gave up.
	printf '%s\n' "${ports[@]}" >"$dir/ports"

	redis_cli --cluster create "${hostports[@]}" --cluster-replicas "$REPLICAS" --cluster-yes \
		>"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(tail -n 5 "$dir/create.log")"
	known_nodes=${#ports[@]} known_replicas=$((${#ports[@]} * REPLICAS / (REPLICAS + 1)))
	wait_every_node cluster_ok_at "${ports[@]}" ||
		die "cluster did not reach cluster_state:ok within 30 s; logs in $dir"
	((REPLICAS == 0)) || wait_every_node synced_at "${ports[@]}" ||
		die "replicas did not finish their first sync within 30 s; logs in $dir"
	((REPLICAS == 0)) || wait_every_node roles_known_at "${ports[@]}" ||
		die "not every node lists every replica with its primary within 30 s; logs in $dir"

	addrs=$(
		IFS=,
		printf '%s' "${hostports[*]}"
	)
	printf '%s\n' "$addrs" >"$dir/addrs"
	trap - EXIT INT TERM
	log "cluster up in $dir"
	printf '%s\n' "$addrs"
}

# cmd_node: starts one more node, not yet in the cluster, beside those of the
# cluster in its dir (the reshard drill adds a primary and its replica) and
# prints its port; `down` stops it with the others.
cmd_node() {
	local dir
	dir=$(cluster_dir)
	[[ -n $dir && -d $dir ]] || die "no cluster is up (run: $0 up)"
	security_args "$dir"
	start_node "$dir"
}

case ${1:-} in
up) cmd_up ;;
node) cmd_node ;;
down) cmd_down ;;
addrs) cmd_addrs ;;
*) usage ;;
esac

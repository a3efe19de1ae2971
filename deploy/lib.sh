# shellcheck shell=bash
# Helpers sourced by the deploy/ scripts. Not meant to be run on its own.

# Loopback ports are drawn from LOW..HIGH: with the cluster bus at port+10000
# both stay below Linux's ephemeral range (32768+), so an outgoing connection
# of some other program never holds the port we are about to bind.
MAYFLY_PORT_LOW=${MAYFLY_PORT_LOW:-15000}
MAYFLY_PORT_HIGH=${MAYFLY_PORT_HIGH:-22000}

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { log "$*"; exit 1; }

# port_in_use PORT: true when something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# random_port: a port in range that nothing listens on, together with
# port+10000 when $1 is "bus". Only a hint: the caller must still cope with
# losing a race for it (redis-server then exits and the caller picks again).
# Drawing at random keeps concurrent runs on one machine (several developers,
# a test and a `make run`) from reaching for the same ports.
random_port() {
	local want_bus=${1:-} span=$((MAYFLY_PORT_HIGH - MAYFLY_PORT_LOW)) p i
	for ((i = 0; i < 200; i++)); do
		p=$((MAYFLY_PORT_LOW + (RANDOM * 32768 + RANDOM) % span))
		port_in_use "$p" && continue
		if [[ $want_bus == bus ]] && port_in_use $((p + 10000)); then
			continue
		fi
		printf '%s\n' "$p"
		return 0
	done
	die "no free loopback port found in $MAYFLY_PORT_LOW-$MAYFLY_PORT_HIGH"
}

# redis_cli ARGS...: redis-cli, over TLS when MAYFLY_CLUSTER_TLS_DIR names the
# certificates of a TLS cluster (deploy/cluster.sh). A password travels in
# REDISCLI_AUTH, which redis-cli reads: never on a command line, where ps
# would show it.
redis_cli() {
	if [[ -n ${MAYFLY_CLUSTER_TLS_DIR:-} ]]; then
		redis-cli --tls --cacert "$MAYFLY_CLUSTER_TLS_DIR/ca.crt" "$@"
	else
		redis-cli "$@"
	fi
}

# redis_memory_args: the Redis settings Mayfly's memory figures rely on
# (deploy/README.md, "Redis settings"), given to every redis-server these
# scripts start. A node refuses to start on an evicting maxmemory-policy and
# warns about the others (cmd/mayfly/redisconfig.go holds the same list).
redis_memory_args=(--hash-max-listpack-value 4096 --hash-max-listpack-entries 48
	--stream-node-max-bytes 256 --maxmemory-policy noeviction)

# redis_info_field PORT FIELD: one field of INFO from the server on PORT.
redis_info_field() {
	redis_cli -h 127.0.0.1 -p "$1" info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

# pid_alive PID: true while PID runs. A zombie counts as gone: daemonized
# servers are reparented to pid 1, which may take seconds to reap them.
pid_alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ -n $stat && ${stat%% *} != Z ]]
}

# ppid_of PID: the parent of PID, from /proc; fails when PID is gone.
ppid_of() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	stat=${stat#* }
	printf '%s\n' "${stat%% *}"
}

# sig_caught PID: the mask of signals PID catches (SigCgt), empty when gone.
sig_caught() {
	sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null || true
}

# pid_in_dir PID DIR: true when PID is alive and its working directory is DIR.
# redis-server chdirs to its --dir, so this tells our servers apart from any
# other process that happens to reuse a recorded pid or port.
pid_in_dir() {
	[[ -n $1 ]] && pid_alive "$1" &&
		[[ $(readlink "/proc/$1/cwd" 2>/dev/null) == "$(readlink -f "$2")" ]]
}

# stop_pid PID DIR: SIGTERM (redis shuts down without saving: --save ''), then
# SIGKILL if it is still there after 10 s. Only touches a process in DIR.
stop_pid() {
	local pid=$1 dir=$2 i
	pid_in_dir "$pid" "$dir" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.05
	done
	log "redis-server pid $pid ignored SIGTERM; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

# wait_redis PORT PID: waits until the redis-server with PID answers on
# PORT. Fails when the process exits first (usually: lost the port to someone
# else) or does not answer within 10 s.
wait_redis() {
	local port=$1 pid=$2 i
	for ((i = 0; i < 100; i++)); do
		if [[ -n $pid ]] && ! pid_alive "$pid"; then
			return 1
		fi
		if [[ -n $pid && $(redis_info_field "$port" process_id) == "$pid" ]]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# load_profile NAME — the local/CI profile for `make run` and `make
# cluster-demo`: dev fills every MAYFLY_* variable of deploy/dev.env that the
# environment leaves unset (relaxed request rate, creation windows, active
# cap, SMTP limits) and exports it; spec keeps the binary's defaults (the
# public spec's).
# Sets profile_note, a line or two for the banner.
load_profile() {
	local key value relaxed=()
	case $1 in
	dev)
		while IFS='=' read -r key value; do
			[[ $key =~ ^MAYFLY_[A-Z0-9_]+$ ]] || continue
			if [[ -z ${!key+set} ]]; then
				export "$key=$value"
				relaxed+=("$key=$value")
			fi
		done <"$(dirname "${BASH_SOURCE[0]}")/dev.env"
		profile_note="Profile: dev (deploy/dev.env; MAYFLY_RUN_PROFILE=spec for the public limits):
  ${relaxed[*]:-(every setting of the profile was set in the environment)}"
		;;
	spec) profile_note="Profile: spec (the binary's defaults: 8 req/s, 5 creations/min, 10/h, 20/day, 5 live inboxes per IP)" ;;
	*) die "MAYFLY_RUN_PROFILE=$1: want dev or spec" ;;
	esac
}

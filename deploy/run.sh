#!/usr/bin/env bash
# run.sh — `make run`: Mayfly on this machine with a private standalone Redis.
#
# Starts one redis-server on a free loopback port with its data in a temp dir
# (unless MAYFLY_REDIS_ADDRS names one), builds bin/mayfly and runs
# `bin/mayfly $MAYFLY_RUN_MODE` (default all) in the foreground, by default on
# the ports the README's quick start promises: HTTP 127.0.0.1:8080, SMTP 127.0.0.1:2525,
# admin 127.0.0.1:9090. Every MAYFLY_* variable set in the environment wins.
# MAYFLY_RUN_PROFILE=dev (the default) fills the unset ones from
# deploy/dev.env (relaxed request rate, creation windows, active cap, SMTP
# connection, mail and session limits);
# MAYFLY_RUN_PROFILE=spec keeps the binary's defaults, the public spec's.
# Ctrl-C, SIGTERM or SIGHUP stops Mayfly, then the Redis, and removes the
# temp dir; so does the end of either server, and so does a signal to the
# `make` that started this script (`kill <pid of make>`, `nohup make run &`
# then `kill $!`): make forwards SIGTERM to its child (the Makefile execs
# this script, so that is us), but on SIGHUP it only waits for its children,
# so a watchdog notices the parent dying or handling a fatal signal.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=deploy/lib.sh
. "$here/lib.sh"

mode=${MAYFLY_RUN_MODE:-all}
profile=${MAYFLY_RUN_PROFILE:-dev}
export MAYFLY_HTTP_ADDR=${MAYFLY_HTTP_ADDR:-127.0.0.1:8080}
export MAYFLY_SMTP_ADDR=${MAYFLY_SMTP_ADDR:-127.0.0.1:2525}
export MAYFLY_ADMIN_ADDR=${MAYFLY_ADMIN_ADDR:-127.0.0.1:9090}
export MAYFLY_COOKIE_SECURE=${MAYFLY_COOKIE_SECURE:-false}
export MAYFLY_DOMAINS=${MAYFLY_DOMAINS:-mayfly.test}
# One node and no load balancer: nothing to drain from, so Ctrl-C stops at
# once instead of serving on for MAYFLY_DRAIN_DELAY.
export MAYFLY_DRAIN_DELAY=${MAYFLY_DRAIN_DELAY:-0s}
http_addr=$MAYFLY_HTTP_ADDR
smtp_addr=$MAYFLY_SMTP_ADDR
admin_addr=$MAYFLY_ADMIN_ADDR

# The profile fills what the environment leaves unset.
profile_note=
load_profile "$profile"

bash "$here/install-deps.sh"

# Fail before starting anything when the fixed ports are taken: the usual
# cause is another `make run` still going.
ports=("$admin_addr")
[[ $mode == ingest ]] || ports+=("$http_addr")
[[ $mode == edge ]] || ports+=("$smtp_addr")
for addr in "${ports[@]}"; do
	port_in_use "${addr##*:}" && die "$addr is already in use (another make run?)"
done

make -C "$repo" --no-print-directory build

dir=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-run.XXXXXX")
redis_pid=
mayfly_pid=
watchdog_pid=

cleanup() {
	local rc=$?
	# A second signal (the watchdog's, make's) must not cut the cleanup short.
	trap - EXIT
	trap '' INT TERM HUP
	if [[ -n $watchdog_pid ]]; then
		kill -TERM "$watchdog_pid" 2>/dev/null || true
	fi
	if [[ -n $mayfly_pid ]] && kill -0 "$mayfly_pid" 2>/dev/null; then
		kill -TERM "$mayfly_pid" 2>/dev/null || true
		wait "$mayfly_pid" 2>/dev/null || true
	fi
	if [[ -n $redis_pid ]]; then
		kill -TERM "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf -- "$dir"
	log "stopped; removed $dir"
	exit "$rc"
}
trap cleanup EXIT
# Forward the signal so Mayfly shuts down gracefully: a background child of a
# non-interactive shell does not get the terminal's Ctrl-C by itself. SIGHUP
# becomes SIGTERM (Mayfly's graceful stop).
on_signal() {
	local sig=$1 code=$2
	[[ $sig == HUP ]] && sig=TERM
	if [[ -n $mayfly_pid ]]; then
		kill -"$sig" "$mayfly_pid" 2>/dev/null || true
		wait "$mayfly_pid" 2>/dev/null || true
	fi
	exit "$code"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# The watchdog: SIGTERM to this script when its parent (make, or the shell
# that ran it) is gone, or handles a fatal signal. GNU make's handler for
# SIGHUP (and SIGINT, SIGQUIT) resets the signal to its default, then waits
# for its children before dying: so a change in the signals the parent
# catches (SigCgt) is the parent going down, waiting for us.
parent=$PPID
parent_sigs=$(sig_caught "$parent")
(
	trap - EXIT INT TERM HUP
	while [[ $(ppid_of $$) == "$parent" && $(sig_caught "$parent") == "$parent_sigs" ]]; do
		sleep 0.3
	done
	kill -TERM $$ 2>/dev/null
) </dev/null >/dev/null 2>&1 &
watchdog_pid=$!

for ((tries = 0; tries < 20; tries++)); do
	[[ -z ${MAYFLY_REDIS_ADDRS:-} ]] || break # the environment names a Redis: use it
	redis_port=$(random_port)
	# A child, not a daemon: it cannot outlive this script unnoticed, and it
	# ignores the terminal's Ctrl-C, so it stops only after Mayfly has.
	# maxmemory: a full Redis refuses writes (noeviction) instead of growing
	# until the kernel kills it; 1 GiB is some 300,000 inboxes with a
	# message each, far past what a local run holds.
	redis-server --port "$redis_port" --bind 127.0.0.1 "${redis_memory_args[@]}" \
		--maxmemory 1gb --save '' --appendonly no --dir "$dir" \
		--logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
	redis_pid=$!
	wait_redis "$redis_port" "$redis_pid" && break
	log "redis-server on port $redis_port did not start (port taken?); trying another"
	kill -TERM "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
done
if [[ -z ${MAYFLY_REDIS_ADDRS:-} ]]; then
	[[ -n $redis_pid ]] || die "could not start redis-server; see $dir/redis.log"
	export MAYFLY_REDIS_ADDRS=127.0.0.1:$redis_port
fi

# The CLI's default base is the default HTTP address; any other is given
# the way docs/cli.md does, through MAYFLY_URL.
cli_base=
[[ $http_addr == 127.0.0.1:8080 ]] || cli_base="  export MAYFLY_URL=http://$http_addr/v1
"

cat <<EOF

Mayfly ($mode) on http://$http_addr  smtp $smtp_addr  admin http://$admin_addr
Redis: $MAYFLY_REDIS_ADDRS${redis_pid:+ (data in $dir)}   Domains: $MAYFLY_DOMAINS
$profile_note

Quick start (copy-paste; <id> and <address> come from the first reply):
  curl -s -c jar -b jar -X POST -H 'Content-Type: application/json' -d '{}' http://$http_addr/v1/mailboxes
  curl -s -c jar -b jar -X POST http://$http_addr/v1/mailboxes/<id>/select
  curl -s -c jar -b jar http://$http_addr/v1/messages
  swaks --server $smtp_addr --to <address> --from test@example.org --header 'Subject: hello' --body 'your code is 123456'
  curl -s -N -c jar -b jar http://$http_addr/v1/events

Or with the CLI, \`mayfly inbox\` (from this checkout: bin/mayfly inbox), in another terminal:
${cli_base}  addr=\$(bin/mayfly inbox new)
  swaks --server $smtp_addr --to "\$addr" --header 'Subject: Your code' --body 'your code is 123456'
  bin/mayfly inbox wait --subject 'Your code'   # up to 20 s, the clients' default (--timeout 1m for more)

Ctrl-C (or kill -TERM / -HUP of make or of this script) stops Mayfly and its Redis.

EOF

"$repo/bin/mayfly" "$mode" &
mayfly_pid=$!
# Whichever server ends first ends the run (cleanup stops the other).
set +e
if [[ -n $redis_pid ]]; then
	wait -n "$mayfly_pid" "$redis_pid"
else
	wait "$mayfly_pid"
fi
rc=$?
set -e
if kill -0 "$mayfly_pid" 2>/dev/null; then
	log "redis-server exited; stopping Mayfly"
	rc=1
else
	mayfly_pid=
fi
exit "$rc"

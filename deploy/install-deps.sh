#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages that `make test` and
# `make run` and `make bench` need beyond Go itself: redis-server,
# redis-tools (redis-cli, redis-benchmark), swaks, libnet-ssleay-perl (swaks --tls),
# haproxy, curl and iptables; with --checks also systemd (systemd-analyze),
# prometheus (promtool) and docker-compose (compose.yaml's `config`). Does nothing when they are all present, so it is cheap to run first
# thing in every script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/lib.sh
. "$here/lib.sh"

command -v go >/dev/null || die "Go is not on PATH; install Go (see go.mod for the version) first"

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
{ command -v redis-cli && command -v redis-benchmark; } >/dev/null || missing+=(redis-tools)
command -v swaks >/dev/null || missing+=(swaks)
# haproxy fronts the local production topology (make cluster-demo, its tests
# and the failover drills); curl is how the scripts probe readiness.
command -v haproxy >/dev/null || missing+=(haproxy)
command -v curl >/dev/null || missing+=(curl)
# iptables cuts a Redis primary off in the partition drill (root only).
command -v iptables >/dev/null || [[ -x /usr/sbin/iptables ]] || missing+=(iptables)
# With --checks (make test, .ci/run): the tools of the deploy artifacts'
# checks, systemd-analyze verify (units) and promtool (alert rules). Only the
# tools are used; the prometheus package's service is kept from starting,
# since it would listen on :9090, the admin port of `make run`.
checks=
[[ ${1:-} == --checks ]] && checks=1
tools=(redis-server redis-cli redis-benchmark swaks haproxy curl)
if [[ -n $checks ]]; then
	tools+=(systemd-analyze promtool docker-compose)
	command -v systemd-analyze >/dev/null || missing+=(systemd)
	command -v promtool >/dev/null || missing+=(prometheus)
	# docker-compose renders deploy/compose/compose.yaml (`config`, offline;
	# no Docker engine needed) for deploy/check's compose_test.go.
	command -v docker-compose >/dev/null || missing+=(docker-compose)
fi
# Node.js 18 or later and npm: the TypeScript client's build and tests
# (clients/typescript). Debian's nodejs is 18 (bookworm) or 20 (trixie).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
# swaks needs Net::SSLeay for --tls (a recommends, which we do not install).
perl -MNet::SSLeay -e1 2>/dev/null || missing+=(libnet-ssleay-perl)
node_ok() { node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; }
if command -v node >/dev/null && ! node_ok; then
	die "Node.js $(node --version) is too old for clients/typescript; install Node.js 18 or later"
fi
# With --checks: the Python client's suite runs on Debian's python3 with its
# pytest (no PyPI), and installs the package into fresh venvs (python3-venv;
# its build backend is in the tree, so no setuptools or wheel is needed).
if [[ -n $checks ]]; then
	/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
	dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'ok installed' || missing+=(python3-venv)
	# Debian's chromium: the browser of the TypeScript client's Playwright
	# suite (clients/typescript/suite, launchOptions.executablePath).
	command -v chromium >/dev/null || missing+=(chromium)
fi
((${#missing[@]} == 0)) && exit 0

apt_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
	die "missing packages: ${missing[*]}. Install them as root: sudo sh -c '$apt_cmd'"
fi
command -v apt-get >/dev/null || die "missing packages: ${missing[*]}, and apt-get is not available to install them"

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The package's own redis service (port 6379) is not used: every script starts
# its own servers on free ports.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	# Debian's way to keep a package's postinst from starting its service.
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for c in "${tools[@]}"; do
	command -v "$c" >/dev/null || die "$c still missing after installing ${missing[*]}"
done
{ command -v node && command -v npm; } >/dev/null || die "node or npm still missing after installing ${missing[*]}"
node_ok || die "Node.js $(node --version) from apt is too old for clients/typescript; install Node.js 18 or later"
perl -MNet::SSLeay -e1 2>/dev/null || die "Net::SSLeay still missing after installing ${missing[*]}"
[[ -z $checks ]] || /usr/bin/python3 -c 'import pytest' 2>/dev/null || die "pytest still missing after installing ${missing[*]}"

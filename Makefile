# Mayfly. Everything here runs on a fresh Debian machine with Go: the scripts
# in deploy/ install what else they need (deploy/install-deps.sh).

# What `make run` starts: edge (HTTP only) or all (HTTP + SMTP ingest).
RUN_MODE ?= all

# staticcheck runs from the module proxy at a pinned version, so it stays out
# of go.mod. v0.8.2 is staticcheck 2026.2.2, checked against Go 1.26.
STATICCHECK_VERSION ?= v0.8.2

GO ?= go

# bash: the drills' recipes need pipefail (go test's status, not grep's).
SHELL := /bin/bash

# What `mayfly version` and /metrics' mayfly_build_info name. VERSION is the
# release tag of the commit (v2026.11.26), or git describe past the last one
# (v2026.11.26-3-g1a2b3c4), with -dirty for uncommitted changes; without git
# (a source tarball) the first line of a VERSION file, else "dev". Only
# release tags (v + a digit) count, not the clients' own. REVISION is the
# full commit hash. Both can be given: make build VERSION=… REVISION=….
VERSION ?= $(shell git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null || head -n 1 VERSION 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# The Dockerfile passes the same two -X flags from its build args.
LDFLAGS = -X main.version=$(VERSION) -X main.revision=$(REVISION)
# Where make build writes the binary.
OUT ?= bin/mayfly

.PHONY: build image run test lint bench bench-smoke bench-scale bench-streams cluster-up cluster-down cluster-demo drill drill-upgrade clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(OUT) ./cmd/mayfly

# The container image, tagged with the version without its v (mayfly:2026.11.26,
# the tag deploy/k8s pins). docker build has no git: the version and revision
# come in as build args.
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t mayfly:$(patsubst v%,%,$(VERSION)) .

# exec: run.sh is make's own child, which make's SIGTERM reaches.
run:
	exec env MAYFLY_RUN_MODE=$(RUN_MODE) bash deploy/run.sh

# Starts a private Redis Cluster, runs every test with -race against it and
# always tears the cluster down. Narrow it with `make test PKGS=./storage/...`
# or add flags with GOTESTFLAGS='-run TestX -v'.
PKGS ?= ./...
test:
	bash deploy/test.sh $(PKGS)

lint:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -not -path './bin/*'); \
	unformatted=$$([ -z "$$files" ] || gofmt -l $$files); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd bench && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd deploy/check && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd clients/go && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
# The client module builds with the oldest Go its go directive names (the
# toolchain comes through the module proxy), and its tests name every
# scenario of clients/SCENARIOS.md.
	cd clients/go && GOTOOLCHAIN=go$$(awk '$$1 == "go" {print $$2}' go.mod) $(GO) vet ./...
	bash clients/check-scenarios.sh
	$(GO) vet -tags drill ./deploy/topology/
	cd clients/typescript && { [ -d node_modules/typescript ] || npm ci --prefer-offline --no-audit --no-fund --loglevel=error; } && npm run --silent lint

# The benchmarks of bench/README.md on a throwaway cluster: writes
# bench/RESULTS.md (about 8 minutes). `make bench BENCH_ONLY=A,D` runs some
# scenarios and writes nothing. bench-smoke runs every scenario once, briefly,
# at tiny scale, and bench-scale at 20,000 inboxes, to prove the scripts work
# (CI runs it; its figures mean nothing).
bench:
	BENCH_ONLY=$(BENCH_ONLY) bash bench/run.sh full

bench-smoke:
	bash bench/run.sh tiny
	SCALE_N=20000 SCALE_SMOKE=1 bash bench/scale.sh

# Mayfly at SCALE_N live inboxes (default 1,000,000; about 20 minutes and
# ~7 GiB of free memory at that size): memory per inbox, message and client
# IP, the hot paths at 1,000 / 100,000 / SCALE_N, and the mass expiry
# (bench/README.md, "Scale"). Replaces its section of bench/RESULTS.md.
SCALE_N ?= 1000000
bench-scale:
	SCALE_N=$(SCALE_N) bash bench/scale.sh

# Bench F at scale: STREAMS_N idle event streams (default 10,000) over as
# many edges as the descriptor limit needs, each with its own load process:
# memory, goroutines and idle CPU per stream, fan-out p50/p99, and the
# restart storm (bench/README.md, "F at scale"; about 2 minutes at 10,000).
# Prints its table; writes nothing.
STREAMS_N ?= 10000
bench-streams:
	STREAMS_N=$(STREAMS_N) bash bench/streams.sh

# A cluster for running tests by hand:
#   make cluster-up && MAYFLY_TEST_REDIS_ADDRS=$$(deploy/cluster.sh addrs) go test ./storage/...
cluster-up:
	bash deploy/install-deps.sh
	bash deploy/cluster.sh up

cluster-down:
	bash deploy/cluster.sh down

# The production shape on loopback: a 3+3 Redis Cluster, 2 edge + 2 ingest
# nodes, haproxy in front (deploy/README.md). Prints its addresses; Ctrl-C
# tears it all down.
cluster-demo:
	bash deploy/topology.sh demo

# Every failover drill of deploy/README.md, with longer load (about 4–5
# minutes, the reshard drill included); prints the table. `make test` runs
# the short ones (primary kill, mid-DATA ingest kill, partition, the
# partition of a primary with one of its two replicas, and the rolling
# restart of every node). The upgrade drill has its own target,
# drill-upgrade.
drill: build
	bash deploy/install-deps.sh
	set -o pipefail; MAYFLY_DRILL=full go test -tags drill -count=1 -timeout 20m -v -run 'Drill' -skip 'TestDrillUpgrade' ./deploy/topology/ | grep -E '^(\||---|ok|FAIL|    (flood_)?drill_)'

# The mixed-version drill (deploy/README.md, "Upgrade drill"): the previous
# release (built from git) and this tree side by side behind haproxy under
# load, rolled one node at a time to this tree writing the old layout, back,
# forward again, then flipped to the new layout (about 3 minutes); prints the
# table, a row per step. `make test` runs a short form (pairs of nodes).
drill-upgrade: build
	bash deploy/install-deps.sh
	set -o pipefail; MAYFLY_DRILL=full go test -count=1 -timeout 20m -v -run 'TestDrillUpgrade' ./deploy/topology/ | grep -E '^(---|ok|FAIL|    upgrade_drill_)'

clean:
	rm -rf bin bench/bin
	rm -f jar *.out *.prof *.test

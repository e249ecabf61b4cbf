# Troupe: two commands set everything up on a fresh machine.
#   make run   the deal-desk example on an embedded Temporal server (offline
#              scripted model unless OPENAI_API_KEY is set)
#   make test  the whole test suite: the packages that need no Temporal
#              server twice with -race (so races and state shared between
#              tests show), the others once, both halves at once (see
#              scripts/packages.sh)
#   make stress N=5  the suite N times; prints each test that failed with
#              its failure rate (scripts/stress.sh)
#   make crash  the kill campaign: the shipped examples' sessions with their
#              worker killed -9 KILLS times each (20) at random, outputs
#              identical to an undisturbed run; SEED=n replays a campaign
#              (each prints its seed)
#   make cluster  a real deployment on this machine (root): PostgreSQL, a
#              Temporal server with mTLS and its Web UI, versitygw, three
#              worker hosts in network namespaces (scripts/cluster.sh up);
#              make cluster-down stops it; make cluster-test runs the
#              cluster's end-to-end tests (up, runs with sealed payloads,
#              hosts killed under runs and sessions, API keys, down)
#   make scale the scale tests at full scale: an agent of 5,001 turns, a
#              session of 2,000 and 10,000 sessions created at once (make
#              test runs them at 1,001, 200 and 1,000)
export GOTOOLCHAIN := local
# The release tag is the one Temporal's own module gates its unreleased
# Kubernetes compute provider (go.temporal.io/auto-scaled-workers) behind:
# without it the embedded server links client-go, 311 packages that a dev
# server never uses, about a minute of a first build. Every go command of
# the Makefile and of the scripts it runs (tests build troupe too) shares
# the tag, so they share one build cache.
export GOFLAGS := $(strip $(GOFLAGS) -tags=release)
GO ?= go
BIN := bin/troupe
N ?= 5
KILLS ?= 20
SEED ?=

.PHONY: run test stress crash scale bench lint setup build clean cluster cluster-down cluster-test cluster-bench

setup:
	@scripts/setup.sh

build:
	$(GO) build -o $(BIN) ./cmd/troupe

# make run installs only what the run needs (scripts/setup.sh run), and
# builds troupe: the first build compiles the embedded Temporal server and
# its Web UI, 5 to 10 minutes on two cores; later ones take seconds.
run:
	@echo "make run: installing bubblewrap if missing, building $(BIN) (a first build takes 5 to 10 minutes on two cores), then running the deal-desk example"
	@scripts/setup.sh run
	@$(MAKE) --no-print-directory build
	$(BIN) run --graph dealdesk "Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks."

# The two halves run at once (the server half is mostly end-to-end tests
# that wait, the other mostly CPU), and go vet beside them, all to the
# end even when one fails; the timeout is per package. The server half
# starts first: its end-to-end package is the long pole. The half without a server runs once,
# under -race (twice kept make test over ten minutes warm on two cores);
# make stress repeats the whole suite to find flaky tests.
test: setup
	@noserver=$$(scripts/packages.sh noserver) && server=$$(scripts/packages.sh server) || exit 1; \
	status=0; set -x; \
	{ [ -z "$$server" ] || $(GO) test -count=1 -timeout 20m $$server; } & second=$$!; \
	{ [ -z "$$noserver" ] || $(GO) test -count=1 -race -timeout 20m $$noserver; } & first=$$!; \
	$(GO) vet ./... || status=1; \
	wait $$first || status=1; wait $$second || status=1; \
	exit $$status

stress: setup
	@scripts/stress.sh $(N)

# The campaign takes many minutes (a kill during a model call costs the
# workflow task timeout); make test runs only its short version
# (TestExamplesSurviveKillsShort).
crash: setup
	TROUPE_E2E_KILLS=$(KILLS) TROUPE_E2E_KILL_SEED=$(SEED) $(GO) test -count=1 -v -timeout 60m -run '^TestExamplesSurviveKills$$' ./e2e/

# The scale tests at the scale they are named for: on a loaded two-core
# machine the session of 2,000 turns alone took 15 minutes.
scale: setup
	$(GO) test -count=1 -timeout 45m -run '^(TestMarathon|TestSessionScale|TestSessionsCreatedConcurrently)$$' ./e2e -args -scale

# The cluster: scripts/cluster.sh (up, down, status, kill-host N,
# restart-host N). A cold up builds the Temporal server (minutes).
cluster: setup
	@scripts/cluster.sh up

cluster-down:
	@scripts/cluster.sh down

cluster-test: setup
	TROUPE_E2E_CLUSTER=1 $(GO) test -count=1 -v -timeout 30m -run '^TestCluster(HostLoss|SessionHostLoss|APIKeys)?$$' ./e2e/

# Host-loss recovery on the cluster: 10 kills of the host running a
# sandbox command, kill to the run's next event, p50/p95 (printed); and
# RUNS (200) deal-desk runs at once on three worker hosts, then on one:
# runs per minute of each (printed).
RUNS ?= 200
cluster-bench: setup
	TROUPE_E2E_CLUSTER=1 TROUPE_E2E_CLUSTER_KILLS=10 $(GO) test -count=1 -v -timeout 60m -run '^TestClusterHostLoss$$' ./e2e/
	TROUPE_E2E_CLUSTER=1 TROUPE_E2E_CLUSTER_RUNS=$(RUNS) $(GO) test -count=1 -v -timeout 60m -run '^TestClusterThroughput$$' ./e2e/

bench: setup
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 45m ./bench/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "go.mod or go.sum is not tidy: go mod tidy would change:"; $(GO) mod tidy -diff; exit 1; }
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 -config workflowcheck.config.yaml ./...

clean:
	rm -rf bin

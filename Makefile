# Troupe: two commands set everything up on a fresh machine.
#   make run   the deal-desk example on an embedded Temporal server (offline
#              scripted model unless OPENAI_API_KEY is set)
#   make test  the whole test suite
export GOTOOLCHAIN := local
GO ?= go
BIN := bin/troupe

.PHONY: run test bench lint setup build clean

setup:
	@scripts/setup.sh

build:
	$(GO) build -o $(BIN) ./cmd/troupe

run: setup build
	$(BIN) run --graph dealdesk "Review the Acme Corp deal: a 3-year, 5000-seat renewal at 35% off list, net-90, go-live in 3 weeks."

test: setup
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

bench: setup
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./bench/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 -config workflowcheck.config.yaml ./...

clean:
	rm -rf bin

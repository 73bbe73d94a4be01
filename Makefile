# edgeota: `make run` brings up the embedded local cluster with the controller
# and one node agent; `make test` runs every check and test. Everything either
# needs is built here from pinned module versions; nothing is installed by hand.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: all build generate sdk-ts check lint breaking fresh fmt vet test test-unit test-fuzz test-e2e tools run bench clean

all: build

## build: the binaries, bin/ota-server, bin/ota-controller and bin/otactl.
# Static (no cgo: Go's own DNS resolver and user lookup, no libc mapped: ~1 MiB
# less resident) and without symbol table or DWARF (stack traces keep their
# function names; the binaries are a third smaller on the node's disk).
# grpcnotrace leaves out grpc-go's golang.org/x/net/trace, unused (tracing is
# off), whose html/template keeps every exported method of every linked type
# (reflection may call any): ~3 MiB less resident in the agent.
build:
	CGO_ENABLED=0 $(GO) build -tags grpcnotrace -trimpath -ldflags "-s -w" -o $(BIN)/ ./cmd/...

# buf comes from its own tools module (hack/buf), pinned there.
$(BIN)/buf: hack/buf/go.mod hack/buf/go.sum
	cd hack/buf && $(GO) build -o $(BIN)/buf github.com/bufbuild/buf/cmd/buf

## generate: regenerate gen/ (Go, gRPC, gateway, OpenAPI) from proto/.
generate: $(BIN)/buf
	$(BIN)/buf generate

## sdk-ts: the TypeScript SDK (sdk/ts/gen/) regenerated with protoc-gen-es,
## its packages installed from sdk/ts/package-lock.json (npm ci), and the
## OpenAPI documents validated. Not needed by check.
sdk-ts: $(BIN)/buf
	cd sdk/ts && npm ci --no-audit --no-fund
	$(BIN)/buf generate --template buf.gen.ts.yaml
	node sdk/ts/validate-openapi.js gen/openapiv2/edgeota/v1/*.swagger.json

## check: buf lint and breaking, generated code freshness, gofmt, go vet.
check: lint breaking fresh fmt vet

lint: $(BIN)/buf
	$(BIN)/buf lint

# Breaking changes are judged against the previous commit when it has protos,
# and against the contract as it stood when this round of work began
# (CONTRACT_BASE), so that a series of commits cannot break it step by step.
CONTRACT_BASE ?= c1d7825
breaking: $(BIN)/buf
	@if git rev-parse -q --verify HEAD~1 >/dev/null && [ -n "$$(git ls-tree -d HEAD~1 proto)" ]; then \
		echo "buf breaking --against .git#ref=HEAD~1"; \
		$(BIN)/buf breaking --against '.git#ref=HEAD~1'; \
	else echo "buf breaking: no previous commit with protos, nothing to compare"; fi
	@if git rev-parse -q --verify '$(CONTRACT_BASE)^{commit}' >/dev/null; then \
		echo "buf breaking --against .git#ref=$(CONTRACT_BASE)"; \
		$(BIN)/buf breaking --against '.git#ref=$(CONTRACT_BASE)'; \
	else echo "buf breaking: the contract base $(CONTRACT_BASE) is not in this clone"; exit 1; fi

# Regenerate and fail if gen/ differs from what is committed.
fresh: generate
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		git status --porcelain -- gen; git --no-pager diff --stat -- gen; \
		echo "gen/ is stale: run 'make generate' and commit it"; exit 1; fi

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## test: every check, the unit tests, a brief fuzz run, then the end-to-end suite on the local cluster.
test: check test-unit test-fuzz test-e2e

## test-unit: unit tests only (no cluster needed).
test-unit:
	$(GO) test -race -count=1 ./...

## test-fuzz: each fuzz target of the node agent for FUZZTIME (a longer run: FUZZTIME=5m).
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzValidatePodRef FuzzREST FuzzGRPCActions
test-fuzz:
	@for f in $(FUZZ_TARGETS); do \
		echo "go test -run '^$$' -fuzz '^$$f$$' -fuzztime $(FUZZTIME) ./server"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./server || exit 1; \
	done

## test-e2e: the end-to-end suite against the embedded local cluster.
test-e2e: tools build sdk-ts
	$(GO) test -count=1 -tags e2e -timeout 40m ./e2e/...

## tools: build the local cluster's binaries into bin/ (skips what is current).
tools:
	hack/tools.sh

## run: the main job: local cluster, controller, one node agent, examples.
run: tools build
	$(GO) build -o $(BIN)/edgeota-run ./hack/run
	exec $(BIN)/edgeota-run

## bench: rollout, marking and node-API figures beside their baselines, on
## the local cluster; writes bench/results/latest.md. BENCH_NODES (500),
## BENCH_SECONDS (5 per load level), BENCH_PAIRS (3), BENCH_UPGRADES (20).
bench: tools build
	$(GO) run ./bench

clean:
	rm -rf $(BIN) .kwok .cache

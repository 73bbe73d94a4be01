# edgeota: `make run` brings up the embedded local cluster with the controller
# and one node agent; `make test` runs every check and test. Everything either
# needs is built here from pinned module versions; nothing is installed by hand.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: all build images image-binaries generate dashboard docs sdk-ts check lint breaking fresh fmt vet tidy staticcheck links mdlinks test test-unit test-images test-fuzz test-monitoring test-e2e tools run bench clean

all: build

# Versions. The VERSION file names the release (and the images' tag); the
# git commit ("-dirty" with uncommitted changes) and its time
# (SOURCE_DATE_EPOCH, the reproducible-builds convention: never the wall
# clock) are stamped into every binary (internal/version, --version) and image.
# Outside git both are empty and the binaries say so.
VERSION := $(shell cat VERSION)
GIT_COMMIT := $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { [ -z "$$(GIT_OPTIONAL_LOCKS=0 git status --porcelain)" ] || c=$$c-dirty; echo $$c; })
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
VERSION_PKG := github.com/edgeota/edgeota/internal/version
VERSION_LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(GIT_COMMIT) -X $(VERSION_PKG).sourceDateEpoch=$(SOURCE_DATE_EPOCH)

# How every binary is built, for this machine (build) and for the images.
# Static (no cgo: Go's own DNS resolver and user lookup, no libc mapped: ~1 MiB
# less resident) and without symbol table or DWARF (stack traces keep their
# function names; the binaries are a third smaller on the node's disk).
# grpcnotrace leaves out grpc-go's golang.org/x/net/trace, unused (tracing is
# off), whose html/template keeps every exported method of every linked type
# (reflection may call any): ~3 MiB less resident in the agent.
GO_BUILD = CGO_ENABLED=0 $(GO) build -tags grpcnotrace -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)"

## build: every binary under cmd/ into bin/ (bin/ota-server, bin/ota-controller, ...).
build:
	$(GO_BUILD) -o $(BIN)/ ./cmd/...

# Binaries under cmd/ that run on a user's machine, never in a cluster:
# make build builds them, make images makes no image of them.
NO_IMAGE := kubectl-edgeota
# The binaries make images packs: every other one under cmd/.
IMAGE_BINARIES := $(filter-out $(NO_IMAGE),$(notdir $(wildcard cmd/*)))

## images: an OCI image-layout tarball per binary under cmd/ (but NO_IMAGE),
## IMAGES_DIR/NAME.tar (default bin/images), each one image index for
## IMAGE_PLATFORMS; the overlay IMAGES_DIR/deploy/ naming the exact tags and
## digests; sizes printed. Names: IMAGE_REPOSITORY/NAME:VERSION.
IMAGES_DIR ?= $(BIN)/images
IMAGE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_REPOSITORY ?= docker.io/edgeota
images: $(BIN)/edgeota-images
	rm -rf $(IMAGES_DIR)/build
	@for p in $(IMAGE_PLATFORMS); do \
		echo "GOOS=$${p%/*} GOARCH=$${p#*/} go build ... -o $(IMAGES_DIR)/build/$${p/\//_}/ $(addprefix ./cmd/,$(IMAGE_BINARIES))"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $(IMAGES_DIR)/build/$${p/\//_}/ $(addprefix ./cmd/,$(IMAGE_BINARIES)); \
	done
	$(BIN)/edgeota-images -root . -binaries $(IMAGES_DIR)/build -out $(IMAGES_DIR) \
		-repository $(IMAGE_REPOSITORY) -version $(VERSION) -revision '$(GIT_COMMIT)' \
		-source-date-epoch '$(SOURCE_DATE_EPOCH)' -platforms '$(IMAGE_PLATFORMS)'

## image-binaries: print the binaries make images packs (hack/images's test reads them).
image-binaries:
	@echo $(IMAGE_BINARIES)

# The image builder and go-containerregistry come from their own tools module
# (hack/images), pinned there.
$(BIN)/edgeota-images: hack/images/go.mod hack/images/go.sum $(filter-out %_test.go,$(wildcard hack/images/*.go))
	cd hack/images && $(GO) build -o $(BIN)/edgeota-images .

# buf comes from its own tools module (hack/buf), pinned there.
$(BIN)/buf: hack/buf/go.mod hack/buf/go.sum
	cd hack/buf && $(GO) build -o $(BIN)/buf github.com/bufbuild/buf/cmd/buf

# staticcheck comes from its own tools module (hack/staticcheck), pinned there:
# its golang.org/x/tools must not move the main module's dependencies, nor
# hack/tools' pinned k8s.io versions.
$(BIN)/staticcheck: hack/staticcheck/go.mod hack/staticcheck/go.sum
	cd hack/staticcheck && $(GO) build -o $(BIN)/staticcheck honnef.co/go/tools/cmd/staticcheck

# helm comes from its own tools module (hack/helm), pinned there; the version
# it reports is the module's.
HELM_VERSION = $(shell awk '$$1 == "helm.sh/helm/v4" { print $$2; exit }' hack/helm/go.mod)
$(BIN)/helm: hack/helm/go.mod hack/helm/go.sum
	cd hack/helm && $(GO) build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

.PHONY: deploy chart binaries

## deploy: render deploy/ from the chart charts/edgeota, the one source of the
## manifests (hack/helm/render.sh): deploy/edgeota.yaml and, for clusters
## before Kubernetes 1.36, deploy/serviceaccount/edgeota.yaml.
deploy: $(BIN)/helm
	hack/helm/render.sh $(BIN)/helm

# check also lints the chart, fails when deploy/ is not what the chart
# renders or the chart's versions are not VERSION, and fails on any compiled
# binary git tracks.
check: chart binaries

# Every monitoring object on, as deploy/monitoring/ renders them.
MONITORING_ON := --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true

chart: $(BIN)/helm
	$(BIN)/helm lint --strict charts/edgeota
	$(BIN)/helm lint --strict charts/edgeota --set agent.identity=serviceaccount
	$(BIN)/helm lint --strict charts/edgeota $(MONITORING_ON)
	@v=$(VERSION); chart=charts/edgeota/Chart.yaml; \
	if ! grep -qx "appVersion: $$v" $$chart || ! grep -qx "version: $${v#v}" $$chart; then \
		echo "$$chart: version and appVersion must be $${v#v} and $$v (the VERSION file)"; exit 1; fi
	@for identity in node serviceaccount; do \
		if $(BIN)/helm template edgeota charts/edgeota --namespace elsewhere --set agent.identity=$$identity $(MONITORING_ON) | grep -n edgeota-system; then \
			echo "charts/edgeota names edgeota-system: take the namespace from .Release.Namespace"; exit 1; fi; done
	hack/helm/render.sh $(BIN)/helm
	@if [ -n "$$(git status --porcelain -- deploy)" ]; then \
		git status --porcelain -- deploy; git --no-pager diff --stat -- deploy; \
		echo "deploy/ is stale: change charts/edgeota, run 'make deploy' and commit both"; exit 1; fi

binaries:
	hack/check-binaries.sh

# The end-to-end suite installs the chart.
test-e2e: $(BIN)/helm

## dashboard: regenerate the Grafana dashboard the chart ships,
## charts/edgeota/monitoring/dashboard.json, from hack/dashboard.
DASHBOARD := charts/edgeota/monitoring/dashboard.json
dashboard:
	$(GO) run ./hack/dashboard -o $(DASHBOARD)

## generate: regenerate gen/ (Go, gRPC, gateway, OpenAPI) from proto/.
generate: $(BIN)/buf
	$(BIN)/buf generate

## sdk-ts: the TypeScript SDK (sdk/ts/gen/) regenerated with protoc-gen-es,
## its packages installed from sdk/ts/package-lock.json (npm ci), and the
## OpenAPI documents validated. Not needed by check.
sdk-ts: $(BIN)/buf sdk/ts/node_modules/.installed
	$(BIN)/buf generate --template buf.gen.ts.yaml
	node sdk/ts/validate-openapi.js gen/openapiv2/edgeota/v1/*.swagger.json

## docs: regenerate the manual's reference tables (docs/reference/:
## annotations, conditions, events, metrics, flags) from the code (hack/docgen).
docs:
	$(GO) run ./hack/docgen -go $(GO) -out docs/reference

## check: buf lint and breaking, generated code and reference tables
## freshness, gofmt, go vet (the e2e suite too), a tidy go.mod, staticcheck,
## the binaries' links, the Markdown's links and e2e markers.
check: lint breaking fresh fmt vet tidy staticcheck links mdlinks

# npm ci runs only when the lockfile or the package changed since the last
# install (an install takes most of a minute; its stamp is node_modules').
sdk/ts/node_modules/.installed: sdk/ts/package-lock.json sdk/ts/package.json
	cd sdk/ts && npm ci --no-audit --no-fund
	touch $@

lint: $(BIN)/buf
	$(BIN)/buf lint

# Breaking changes are judged against the previous commit when it has protos,
# and against the contract as it stood when this round of work began
# (CONTRACT_BASE), so that a series of commits cannot break it step by step.
# buf clones the repository shallowly; it is told to go as deep as the
# repository's history, so that CONTRACT_BASE stays within reach however many
# commits follow it.
CONTRACT_BASE ?= c1d7825
breaking: $(BIN)/buf
	@if git rev-parse -q --verify HEAD~1 >/dev/null && [ -n "$$(git ls-tree -d HEAD~1 proto)" ]; then \
		echo "buf breaking --against .git#ref=HEAD~1"; \
		$(BIN)/buf breaking --against '.git#ref=HEAD~1'; \
	else echo "buf breaking: no previous commit with protos, nothing to compare"; fi
	@if git rev-parse -q --verify '$(CONTRACT_BASE)^{commit}' >/dev/null; then \
		echo "buf breaking --against .git#ref=$(CONTRACT_BASE)"; \
		$(BIN)/buf breaking --against ".git#ref=$(CONTRACT_BASE),depth=$$(git rev-list --count --all)"; \
	else echo "buf breaking: the contract base $(CONTRACT_BASE) is not in this clone"; exit 1; fi

# Regenerate and fail if gen/, the dashboard or a generated reference table
# (docs/reference/, each marked as hack/docgen's) differs from what is
# committed.
fresh: generate dashboard docs
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		git status --porcelain -- gen; git --no-pager diff --stat -- gen; \
		echo "gen/ is stale: run 'make generate' and commit it"; exit 1; fi
	@if [ -n "$$(git status --porcelain -- $(DASHBOARD))" ]; then \
		git --no-pager diff --stat -- $(DASHBOARD); \
		echo "$(DASHBOARD) is stale: run 'make dashboard' and commit it"; exit 1; fi
	@generated=$$(grep -l '^<!-- Generated by hack/docgen' docs/reference/*.md || true); \
	if [ -z "$$generated" ]; then echo "docs/reference/ holds no table of hack/docgen's"; exit 1; fi; \
	if [ -n "$$(git status --porcelain -- $$generated)" ]; then \
		git status --porcelain -- $$generated; git --no-pager diff --stat -- $$generated; \
		echo "docs/reference/ is stale: run 'make docs' and commit it"; exit 1; fi

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	cd hack/images && $(GO) vet ./...
	cd hack/monitoring && $(GO) vet ./...

# go.mod and go.sum as `go mod tidy` would leave them.
tidy:
	$(GO) mod tidy -diff

# links fails if a binary that runs in the cluster (the agent, the
# controller) links client-go's clientset, informers or leader election:
# each imports client-go's scheme of every API group, ~10 MB of the binary
# and of its resident pages (internal/kube).
links:
	@for cmd in ota-server ota-controller; do \
		if $(GO) list -deps ./cmd/$$cmd | grep -E '^k8s.io/client-go/(kubernetes|informers|tools/leaderelection)(/|$$)'; then \
			echo "cmd/$$cmd links the packages above: call the API through internal/kube"; exit 1; fi; done

# mdlinks fails on a broken relative link or anchor in any Markdown file, on
# an e2e marker naming no scenario of e2e/, and on an example manifest of the
# manual without one (hack/mdlinks).
mdlinks:
	$(GO) run ./hack/mdlinks

# staticcheck's default checks (unused code included) over the main module,
# the end-to-end suite with its build tag included.
staticcheck: $(BIN)/staticcheck
	$(BIN)/staticcheck -tags e2e ./...

## test: the end-to-end suite on the local cluster, and, once its scenarios
## that run alone are done, beside those that run side by side: every check,
## the unit tests, make images twice (checked), a brief fuzz run, and the
## alerts and the chart's monitoring objects. At the end, also when a stage
## fails or times out, the time of each stage and the ten slowest scenarios
## (hack/test.sh). make check alone takes seconds.
test: $(BIN)/testlog
	E2E_REPORT=$(E2E_REPORT) E2E_SIDE_BY_SIDE=$(E2E_SIDE_BY_SIDE_FILE) hack/test.sh "" test-e2e "check test-unit test-monitoring test-images test-fuzz"

## test-unit: unit tests only (no cluster needed).
test-unit:
	$(GO) test -race -count=1 ./...

## test-images: run make images twice into temporary directories and check
## every image (hack/images/images_test.go); kubectl comes from make tools.
test-images: tools
	cd hack/images && $(GO) test -count=1 -timeout 30m ./...

## test-fuzz: each fuzz target of the node agent, and the maintenance-window
## parser, for FUZZTIME (a longer run: FUZZTIME=5m).
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzValidatePodRef FuzzREST FuzzGRPCActions
test-fuzz:
	@for f in $(FUZZ_TARGETS); do \
		echo "go test -run '^$$' -fuzz '^$$f$$' -fuzztime $(FUZZTIME) ./server"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./server || exit 1; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./window

## test-monitoring: the alerts (promtool check rules, and promtool test rules:
## each alert firing and not, hack/monitoring/alerts.test.yaml), and the
## chart's monitoring objects decoded strictly into the Prometheus Operator's
## types, the ServiceMonitor matching its Service (hack/monitoring, a module
## of its own). promtool is built by make tools (hack/prometheus).
ALERTS := charts/edgeota/monitoring/alerts.yaml
test-monitoring: $(BIN)/helm
	hack/tools.sh promtool
	$(BIN)/promtool check rules $(ALERTS)
	$(BIN)/promtool test rules hack/monitoring/alerts.test.yaml
	cd hack/monitoring && HELM=$(BIN)/helm $(GO) test -count=1 ./...

## test-e2e: the end-to-end suite against the embedded local cluster, its
## scenarios E2E_PARALLEL at a time where they may run side by side
## (e2e/README.md); E2E_RUN=TestName runs one (a go test -run pattern). The
## log shows each scenario's start and end and a failure's whole output;
## the go test -json report is E2E_REPORT, the logs .cache/e2e/<scenario>/.
E2E_PARALLEL ?= 8
E2E_RUN ?=
E2E_REPORT := .cache/e2e-report.json
# E2E_SIDE_BY_SIDE, when set, is a file testlog creates once the scenarios
# that run alone are done: make test then starts the stages that may run
# beside the rest (hack/test.sh).
E2E_SIDE_BY_SIDE ?=
E2E_SIDE_BY_SIDE_FILE := .cache/e2e-side-by-side
test-e2e: tools build sdk-ts $(BIN)/testlog
	@mkdir -p $(dir $(E2E_REPORT))
	$(BIN)/testlog run -report $(E2E_REPORT) $(if $(E2E_SIDE_BY_SIDE),-side-by-side $(E2E_SIDE_BY_SIDE)) -- $(GO) test -count=1 -tags e2e -timeout 60m -parallel $(E2E_PARALLEL) -json $(if $(E2E_RUN),-run '$(E2E_RUN)') ./e2e/...

# testlog reads the end-to-end suite's go test -json report (hack/testlog).
$(BIN)/testlog: $(filter-out %_test.go,$(wildcard hack/testlog/*.go))
	$(GO) build -o $(BIN)/testlog ./hack/testlog

## tools: build the local cluster's binaries, and Prometheus and promtool (hack/prometheus), into bin/ (skips what is current).
tools:
	hack/tools.sh

## run: the main job: local cluster, controller, one node agent, examples.
## RUN_FLAGS go to it, e.g. RUN_FLAGS=-pull-delay=10s (bench/README.md).
RUN_FLAGS ?=
run: tools build
	$(GO) build -o $(BIN)/edgeota-run ./hack/run
	exec $(BIN)/edgeota-run $(RUN_FLAGS)

## bench: rollout, marking and node-API figures beside their baselines, on
## the local cluster; writes bench/results/latest.md. BENCH_NODES (500),
## BENCH_SECONDS (5 per load level), BENCH_PAIRS (3), BENCH_UPGRADES (20),
## BENCH_SCENARIOS (all; e.g. rollout,nodeapi), BENCH_HEARTBEAT (2s, or
## lease), BENCH_ATREST_SECONDS (60), BENCH_ATREST_TIMED (0, 1 or 2); bench/README.md.
bench: tools build
	$(GO) run ./bench

clean:
	rm -rf $(BIN) .kwok .cache

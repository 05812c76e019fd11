# agentrewind — build, generate and test. `make help` lists the targets.

# Tool and toolchain versions, pinned. K8S_VERSION must match k8s.io/kubernetes in hack/tools/go.mod and
# the k8s.io/api minor in go.mod.
CONTROLLER_GEN_VERSION ?= v0.23.0
K8S_VERSION            ?= v1.37.2
VERSITYGW_VERSION      ?= v1.8.0
# Helm 3 (stable), built from the Go module proxy like controller-gen.
HELM_VERSION           ?= v3.22.0
# golangci-lint with kube-api-linter compiled in (hack/lint). Both must match hack/lint/go.mod; the rule
# that builds bin/golangci-kal-* checks that they do.
GOLANGCI_LINT_VERSION  ?= v2.15.0
KAL_VERSION            ?= v0.0.0-20260716143926-092fe0c72997

# Image: BASE_IMAGE is the runtime base. Production builds use a distroless static non-root image from
# their own mirror; the default, scratch, needs no registry and works on an offline machine.
IMG        ?= agentrewind:dev
AGENT_IMG  ?= agentrewind-proxy-agent:dev
BASE_IMAGE ?= scratch

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/agentrewind/agentrewind/internal/version.Version=$(VERSION) \
           -X github.com/agentrewind/agentrewind/internal/version.Commit=$(COMMIT)

LOCALBIN       ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(K8S_VERSION)
VERSITYGW      ?= $(LOCALBIN)/versitygw-$(VERSITYGW_VERSION)
HELM           ?= $(LOCALBIN)/helm-$(HELM_VERSION)
GOLANGCI_KAL   ?= $(LOCALBIN)/golangci-kal-$(GOLANGCI_LINT_VERSION)-kal-$(lastword $(subst -, ,$(KAL_VERSION)))
CA_BUNDLE      ?= /etc/ssl/certs/ca-certificates.crt

# The tests find the control plane and the S3 server through these.
export KUBEBUILDER_ASSETS := $(ENVTEST_ASSETS)
export VERSITYGW
# The chart's tests (test/chart) and the end-to-end suite render and install charts/agentrewind with it.
export HELM

GOTEST_FLAGS ?= -count=1 -timeout 25m

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and RBAC from the API types and markers.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=agentrewind-manager paths="./cmd/...;./internal/controller/..." output:rbac:artifacts:config=config/rbac
	hack/chart-gen.sh
	@$(MAKE) --no-print-directory api-docs

.PHONY: api-docs
api-docs: ## Generate docs/api.md, the API reference, from the CRDs in config/crd/bases (make manifests runs it).
	go run ./hack/apidocs -crds config/crd/bases -out docs/api.md

.PHONY: diagram
diagram: ## Render docs/architecture.dot to docs/architecture.svg and .png (needs Graphviz's dot; the images are committed).
	@command -v dot >/dev/null || { echo "dot not found: install Graphviz (apt-get install graphviz)"; exit 1; }
	dot -Tsvg docs/architecture.dot -o docs/architecture.svg
	dot -Tpng -Gdpi=110 docs/architecture.dot -o docs/architecture.png

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods for the API types, and config/argocd/argocd-cm.yaml from the Argo CD health checks.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."
	go run ./hack/argocd-cm.go

.PHONY: fmt
fmt: ## Run go fmt against the code.
	go fmt ./...

.PHONY: tidy
tidy: ## Tidy go.mod and the SDK example's module (run it after adding a dependency the engine imports).
	go mod tidy
	cd examples/sdk-agent && go mod tidy

.PHONY: vet
vet: ## Run go vet against the code.
	go vet ./...

.PHONY: verify-gen
verify-gen: manifests generate ## Fail if generated files (CRDs, RBAC, DeepCopy, docs/api.md) are stale (run 'make manifests generate' and commit).
	@if [ -n "$$(git status --porcelain -- api config charts docs/api.md)" ]; then \
		echo "Generated files are stale; run 'make manifests generate' and commit:"; \
		git status --porcelain -- api config charts docs/api.md; git --no-pager diff --stat -- api config charts docs/api.md; exit 1; \
	fi
	@echo "Generated files are current."

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt'd.
	@files=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$files" ]; then echo "Not gofmt'd (run 'make fmt'):"; echo "$$files"; exit 1; fi

.PHONY: lint-api
lint-api: golangci-kal ## Lint the API types (./api/...) with kube-api-linter (config: hack/lint/kal.golangci.yml).
	$(GOLANGCI_KAL) run --config hack/lint/kal.golangci.yml ./api/...

# On a developer's machine `make test` regenerates and formats; in CI (CI=true) it verifies instead, so
# a stale CRD or an unformatted file fails the build rather than being fixed in a throwaway clone.
ifeq ($(CI),true)
TEST_PREREQS := verify-gen verify-fmt
else
TEST_PREREQS := manifests generate fmt
endif

.PHONY: chromium
chromium: ## Install Debian's chromium for the web timeline's browser tests (internal/ui) when it is missing; needs root, else says loudly that they will skip.
	@command -v chromium >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		export DEBIAN_FRONTEND=noninteractive; apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	fi; \
	command -v chromium >/dev/null 2>&1 || echo "*** chromium is missing and cannot be installed here (needs root and apt-get): the browser tests of internal/ui will SKIP ***" >&2

.PHONY: test
test: $(TEST_PREREQS) vet lint-api envtest-assets s3-server helm-lint chromium ## Run all tests against a real API server and a real S3 server, after linting the API.
	go test $(GOTEST_FLAGS) ./...
	@# The public SDK from a module of its own: what a Go agent in another repository can import.
	cd examples/sdk-agent && go vet ./... && go test $(GOTEST_FLAGS) ./...

.PHONY: bench
bench: ## Run the benchmarks side by side with their peers (compare the ratios, not absolute times).
	go test -run '^$$' -bench Fingerprint -benchtime 2000x ./internal/engine/fingerprint/
	go test -run '^$$' -bench 'Replay$$' -benchtime 3x ./internal/engine/replay/
	@# A 100,000- and a 1,000,000-call session loaded and replayed by a fresh process: load and replay time, peak RSS
	@# per event, and the 100k -> 1M ratios (linear is 10; ARW_SCALE_MAX lowers the top).
	go test -run '^$$' -bench Scale -benchtime 1x -timeout 60m ./internal/engine/replay/
	go test -run '^$$' -bench LoadSession -benchtime 20x ./internal/engine/session/
	@# Push and pull of a 105 MB session through the session store vs raw minio-go moving the same objects on versitygw
	@# (ratios, MB/s and requests of each side; the median of 3 rounds: run it 5 times), and 20 forks' bytes vs 20 copies.
	go test -run '^$$' -bench Store -benchtime 1x ./internal/blobstore/
	@# A synthetic run of 10, 100 and 1,000 turns: stored bytes / final transcript now and as schema 2 stored it, and
	@# write, load, record and replay time 100 -> 1,000 (linear is 10; recording and replaying hash every request whole,
	@# and the agent sends the whole conversation each call: their -per-byte-sent ratios are 1 where linear in what it sends).
	go test -run '^$$' -bench StorageScaling -benchtime 1x ./internal/engine/session/
	go test -run '^$$' -bench RecordedRunScaling -benchtime 1x -timeout 30m ./internal/engine/replay/
	@# Capture of a 1 GiB, 10,000-file workspace vs tar | sha256sum, then again after changing 1 % of it
	@# (ARW_CHECKPOINT_BENCH_BYTES shrinks it); and issue 18's 250,000-file workspace captured 20 times
	@# with 10 files changed each time: p50/p95, CPU, files read, bytes stored, manifest bytes uploaded (its
	@# changed chunks and root), a new process's capture (cold-s), vs find (ARW_CHECKPOINT_BENCH_FILES).
	go test -run '^$$' -bench Capture -benchtime 1x -timeout 60m ./internal/engine/checkpoint/
	@# The rewind proxy over loopback HTTP: replay vs go-vcr v4 (its default matcher and a body-hash one) at
	@# 1,000, 10,000 and 100,000 calls, printed as proxy/go-vcr-<matcher>. go-vcr's scan is quadratic: a side is
	@# cut off after a minute (the ratio is then a lower bound, proxy/go-vcr-<matcher>-at-least) and not run
	@# where predicted to need over ten. Then the latency a replayed call adds over the fake upstream
	@# answering directly, and record-mode overhead (short requests, a distinct 20 KiB message in each, and the short
	@# requests with the fake taking 20 ms to answer, still far faster than a hosted model), each
	@# beside a bare httputil.ReverseProxy hop to the same fake (bare-hop-*: what any proxy costs;
	@# over-bare-hop-% is what recording adds on top of it).
	go test -run '^$$' -bench 'ProxyReplayVsGoVCR/calls=1000$$' -benchtime 3x ./internal/proxy/
	go test -run '^$$' -bench 'ProxyReplayVsGoVCR/calls=(10000|100000)$$' -benchtime 1x -timeout 30m ./internal/proxy/
	go test -run '^$$' -bench 'ProxyReplayAddedLatency|ProxyRecordOverhead' -benchtime 3x ./internal/proxy/
	@# The blob sweep over 1,000 sessions and 100,000 blob keys on versitygw (under a minute) vs a plain listing of the
	@# same keys: time per 1,000 sessions, S3 requests per blob, and both ratios. ARW_GC_BENCH_FULL=1 runs the issue's
	@# 10,000 sessions and 1,000,000 keys (ARW_GC_BENCH_SESSIONS / ARW_GC_BENCH_BLOBS set any other size).
	go test -run '^$$' -bench SweepVsListing -benchtime 1x -timeout 60m ./internal/engine/gc/blobsweep/
	@# The AgentSession and ResumePlan controllers vs a no-op reconciler on one envtest API server (about 2 minutes):
	@# 1,000 sessions (ARW_SCALE_SESSIONS), sessions/s for both and the ratio, API writes per session and per change,
	@# API server CPU per session; ARW_SCALE_APISERVER_PROFILE=<file> saves a kube-apiserver CPU profile.
	go test -run '^$$' -bench ControllersVsNoop -benchtime 1x -timeout 30m ./internal/controller/

.PHONY: helm-lint
helm-lint: helm ## Lint and render the Helm chart (charts/agentrewind) with each value set in its ci/ directory.
	@for f in charts/agentrewind/ci/*-values.yaml; do \
		echo "helm lint --strict and helm template with $$f"; \
		$(HELM) lint --strict charts/agentrewind -f $$f >/dev/null || { $(HELM) lint --strict charts/agentrewind -f $$f; exit 1; }; \
		$(HELM) template agentrewind charts/agentrewind -n agentrewind-system -f $$f >/dev/null; \
	done
	@# A misspelt value is an error (values.schema.json), not a silently ignored setting.
	@if $(HELM) template agentrewind charts/agentrewind -f charts/agentrewind/ci/default-values.yaml --set stor.endpoint=x >/dev/null 2>&1; then \
		echo "values.schema.json accepted the misspelt value stor.endpoint"; exit 1; fi

##@ Build

.PHONY: build
build: generate ## Build the agentrewind binary into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/agentrewind ./cmd/agentrewind
	ln -sf agentrewind $(LOCALBIN)/kubectl-rewind && ln -sf agentrewind $(LOCALBIN)/kubectl_complete-rewind # the kubectl plugin and its completion

.PHONY: run
run: manifests generate ## Run the manager from your host against the cluster in KUBECONFIG.
	go run ./cmd/agentrewind manager

.PHONY: docker-build
docker-build: build ## Build the container image IMG on BASE_IMAGE (default scratch), and AGENT_IMG, the proxy-agent example FROM scratch.
	@test -f $(CA_BUNDLE) || { echo "No CA bundle at $(CA_BUNDLE): install ca-certificates or set CA_BUNDLE"; exit 1; }
	cp $(CA_BUNDLE) $(LOCALBIN)/ca-certificates.crt
	docker build --build-arg BASE_IMAGE=$(BASE_IMAGE) -t $(IMG) .
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $(LOCALBIN)/proxy-agent-image/proxy-agent ./examples/proxy-agent && cp $(CA_BUNDLE) $(LOCALBIN)/proxy-agent-image/ca-certificates.crt
	docker build -f examples/proxy-agent/Dockerfile -t $(AGENT_IMG) $(LOCALBIN)/proxy-agent-image

##@ Toolchain (built from the Go module proxy, cached in bin/)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

# The -X flags are those of helm's own Makefile: its version, and the Kubernetes version helm template
# and helm lint assume (that of its client-go, 1.37), which the chart's kubeVersion is checked against.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37
.PHONY: helm
helm: $(HELM) ## Install helm into bin/.
$(HELM):
	@mkdir -p $(LOCALBIN)
	@echo "Building helm $(HELM_VERSION) (about a minute cold)..."
	GOBIN=$(LOCALBIN)/.helm-$(HELM_VERSION) CGO_ENABLED=0 go install -trimpath -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/.helm-$(HELM_VERSION)/helm $(HELM)
	rmdir $(LOCALBIN)/.helm-$(HELM_VERSION)

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd and kubectl for envtest into bin/k8s/<version>/.
	hack/build-envtest-assets.sh $(K8S_VERSION) >/dev/null

.PHONY: s3-server
s3-server: $(VERSITYGW) ## Build the versitygw S3 server the tests start into bin/.
$(VERSITYGW):
	@mkdir -p $(LOCALBIN)
	@echo "Building versitygw $(VERSITYGW_VERSION) (about a minute cold)..."
	GOBIN=$(LOCALBIN)/.versitygw-$(VERSITYGW_VERSION) CGO_ENABLED=0 go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	mv $(LOCALBIN)/.versitygw-$(VERSITYGW_VERSION)/versitygw $(VERSITYGW)
	rmdir $(LOCALBIN)/.versitygw-$(VERSITYGW_VERSION)

.PHONY: golangci-kal
golangci-kal: $(GOLANGCI_KAL) ## Build golangci-lint with kube-api-linter compiled in (hack/lint) into bin/.
$(GOLANGCI_KAL):
	@mkdir -p $(LOCALBIN)
	@grep -qx '	github.com/golangci/golangci-lint/v2 $(GOLANGCI_LINT_VERSION)' hack/lint/go.mod && \
		grep -qx '	sigs.k8s.io/kube-api-linter $(KAL_VERSION)' hack/lint/go.mod || \
		{ echo "GOLANGCI_LINT_VERSION/KAL_VERSION do not match hack/lint/go.mod"; exit 1; }
	@echo "Building golangci-lint $(GOLANGCI_LINT_VERSION) with kube-api-linter (a few minutes cold)..."
	cd hack/lint && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $(GOLANGCI_KAL).tmp .
	mv $(GOLANGCI_KAL).tmp $(GOLANGCI_KAL)

##@ Demo

# The demo runs the operator on the single-node cluster of hack/cluster (as root, with Docker; the first
# run builds the cluster's binaries from the Go module proxy, which takes a while cold), and leaves the
# cluster up for you to explore: `make cluster-down` stops it. A fresh image tag per run, as for e2e.
ifeq ($(origin DEMO_TAG),undefined)
DEMO_TAG := demo-$(shell date +%Y%m%d%H%M%S)
endif
.PHONY: demo
demo: manifests helm cluster-up ## Run the demo on the single-node cluster: the operator installed with its Helm chart, a recorded session, a prompt-fix fork, a replay suite, through kubectl.
	$(MAKE) --no-print-directory docker-build store-image IMG=agentrewind:$(DEMO_TAG) AGENT_IMG=agentrewind-proxy-agent:$(DEMO_TAG)
	hack/cluster/import-image.sh agentrewind:$(DEMO_TAG) agentrewind-proxy-agent:$(DEMO_TAG) $(E2E_STORE_IMG)
	docker rmi agentrewind:$(DEMO_TAG) agentrewind-proxy-agent:$(DEMO_TAG) >/dev/null
	go run ./hack/demo -image agentrewind:$(DEMO_TAG) -agent-image agentrewind-proxy-agent:$(DEMO_TAG) -store-image $(E2E_STORE_IMG) \
		-kubeconfig $(CLUSTER_KUBECONFIG) -kubectl $(ENVTEST_ASSETS)/kubectl -agentrewind $(LOCALBIN)/agentrewind -helm $(HELM)

.PHONY: demo-ui
demo-ui: build ## After make demo: the web timeline (agentrewind ui --cluster) of the demo's sessions, forks and verdicts on http://127.0.0.1:8790/.
	AWS_ACCESS_KEY_ID=demo-access-key AWS_SECRET_ACCESS_KEY=demo-secret-key $(LOCALBIN)/agentrewind ui --cluster \
		--kubeconfig $(CLUSTER_KUBECONFIG) -n agentrewind-demo --store s3://agentrewind --endpoint \
		http://$$($(ENVTEST_ASSETS)/kubectl --kubeconfig $(CLUSTER_KUBECONFIG) get service -n agentrewind-system agentrewind-store -o jsonpath='{.spec.clusterIP}'):7070

##@ End-to-end (a real single-node cluster on this machine: hack/cluster, run as root)

# The cluster runs Kubernetes $(K8S_VERSION) (pinned to 1.37: 1.38 needs a newer containerd than Debian 12
# ships, for the CRI RuntimeConfig call, and cgroup v2). Its admin kubeconfig is written here:
CLUSTER_KUBECONFIG ?= $(LOCALBIN)/cluster/admin.kubeconfig
# A fresh tag per e2e build: the kubelet never pulls (imagePullPolicy: Never), so a reused tag could run
# an older image.
ifeq ($(origin E2E_TAG),undefined)
E2E_TAG := e2e-$(shell date +%Y%m%d%H%M%S)
endif
E2E_IMG       ?= agentrewind:$(E2E_TAG)
E2E_AGENT_IMG ?= agentrewind-proxy-agent:$(E2E_TAG)
# The in-cluster S3 server (hack/cluster/addons/store.yaml): bin/versitygw FROM scratch, one tag per version.
E2E_STORE_IMG ?= agentrewind.local/versitygw:$(VERSITYGW_VERSION)
E2E_FLAGS ?= -count=1 -timeout 20m -v

.PHONY: cluster-binaries
cluster-binaries: envtest-assets ## Build kube-controller-manager, kube-scheduler, kubelet, kube-proxy (and the pause and cluster-dns binaries) into bin/.
	hack/cluster/build.sh $(K8S_VERSION) >/dev/null

.PHONY: cluster-up
cluster-up: cluster-binaries ## Start the single-node cluster (idempotent); KUBECONFIG=bin/cluster/admin.kubeconfig.
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the single-node cluster and remove everything it created (Docker is left running).
	hack/cluster/down.sh

.PHONY: cluster-import
cluster-import: ## Copy the Docker image IMG into the cluster's containerd (pods use it with imagePullPolicy: Never).
	hack/cluster/import-image.sh $(IMG)

# The store image: versitygw FROM scratch (hack/cluster/addons/versitygw), built once per version.
.PHONY: store-image
store-image: $(VERSITYGW) ## Build the in-cluster S3 server image E2E_STORE_IMG from bin/versitygw-*.
	@mkdir -p $(LOCALBIN)/store-image && cp $(VERSITYGW) $(LOCALBIN)/store-image/versitygw
	DOCKER_BUILDKIT=0 docker build -q -f hack/cluster/addons/versitygw/Dockerfile -t $(E2E_STORE_IMG) $(LOCALBIN)/store-image >/dev/null

# With KUBECONFIG set the suite runs against that cluster, which must already hold E2E_IMG, E2E_AGENT_IMG
# and E2E_STORE_IMG; otherwise it starts the local cluster when needed and imports the freshly built
# images into it. The suite records on this machine with bin/agentrewind and the agent's binary.
.PHONY: e2e
e2e: helm ## Run the end-to-end suite (test/e2e) on the single-node cluster, or on the cluster in KUBECONFIG; it installs the operator with Helm (E2E_INSTALL=kustomize: config/default).
	@if [ -z "$$KUBECONFIG" ]; then $(MAKE) --no-print-directory cluster-up; fi
	$(MAKE) --no-print-directory docker-build store-image IMG=$(E2E_IMG) AGENT_IMG=$(E2E_AGENT_IMG)
	@if [ -z "$$KUBECONFIG" ]; then hack/cluster/import-image.sh $(E2E_IMG) $(E2E_AGENT_IMG) $(E2E_STORE_IMG) && \
		docker rmi $(E2E_IMG) $(E2E_AGENT_IMG) >/dev/null; fi
	E2E_IMAGE=$(E2E_IMG) E2E_AGENT_IMAGE=$(E2E_AGENT_IMG) E2E_STORE_IMAGE=$(E2E_STORE_IMG) \
		E2E_AGENTREWIND=$(LOCALBIN)/agentrewind E2E_AGENT=$(LOCALBIN)/proxy-agent-image/proxy-agent \
		KUBECTL=$(ENVTEST_ASSETS)/kubectl E2E_KUBECONFIG=$(CLUSTER_KUBECONFIG) \
		go test -tags e2e $(E2E_FLAGS) ./test/e2e/...

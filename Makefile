# capo-sharednet — the commands a user and CI run. `make help` lists them.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
TOOLS := $(BIN)/tools
CONTROLLER_GEN_VERSION := v0.19.0
KUSTOMIZE_VERSION := v5.7.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE := $(TOOLS)/kustomize-$(KUSTOMIZE_VERSION)
# golangci-lint with kube-api-linter compiled in (hack/tools/golangci-lint);
# its versions are that module's go.mod.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" { print $$2 }' hack/tools/golangci-lint/go.mod)
GOLANGCI_LINT := $(TOOLS)/golangci-lint-kal-$(GOLANGCI_LINT_VERSION)
IMG ?= ghcr.io/capo-sharednet/capo-sharednet:dev
# Flags shared by `make build` and the Dockerfile.
# The version the manager reports (--version, User-Agent); a release sets it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO_BUILD_FLAGS := -trimpath -ldflags "-s -w -extldflags=-static -X github.com/capo-sharednet/capo-sharednet/internal/version.Version=${VERSION}"

export GOTOOLCHAIN := local
# Go's default install place, used when no go is found earlier on PATH.
export PATH := $(PATH):/usr/local/go/bin

##@ Main

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-22s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: test
test: ## Run every test (unit; integration on a real kube-apiserver and a real OpenStack); installs what it needs.
	./hack/test.sh

.PHONY: test-unit
test-unit: ## The fast tier: every decision on fakes (no kube-apiserver, no OpenStack test bed); about a minute with a warm build cache.
	env -u KUBEBUILDER_ASSETS -u CAPO_SHAREDNET_TESTBED_CLOUDS go test -short -count=1 ./...

.PHONY: demo
demo: ## The main job: a local management plane (real API server, CAPI, CAPO, this extension, OpenStack on loopback), a cluster, md-a attached.
	./hack/demo.sh up

.PHONY: demo-down
demo-down: ## Tear down everything `make demo` started.
	./hack/demo.sh down

.PHONY: e2e
e2e: ## Run only the local e2e suite (e2e/: the whole story on the local plane); `make test` runs it too.
	./hack/test.sh ./e2e/ -v -ginkgo.v

.PHONY: test-reliability
test-reliability: ## Outages, crashes and a failing cloud on real parts (docs/reliability.md): the selector test, then the e2e specs labelled reliability but not datapath (extension stopped; killed with SIGKILL mid-attach, mid-detach, mid-BeforeClusterDelete, and right after a share, an unshare, a load-balancer deletion; Keystone, Neutron and Octavia failing behind a proxy); about 16 minutes with the plane built (measured: the story 9m40s, the failing cloud 5m42s), about 21 cold; `make test` runs them too.
	./hack/test.sh ./test/leader/ -run TestAReappliedShippedSelectorIsPutRightAtOnce -v
	./hack/test.sh ./e2e/ -v -ginkgo.v -ginkgo.label-filter='reliability && !datapath'

.PHONY: run
run: ## Run the manager against the cluster of $KUBECONFIG (webhook certs in $(CERT_DIR)).
	go run . --webhook-cert-dir=$(or $(CERT_DIR),/tmp/k8s-webhook-server/serving-certs) --diagnostics-address=127.0.0.1:8443 --health-addr=127.0.0.1:9440

.PHONY: bench
bench: ## Run the benchmarks of docs/performance.md (hooks, admission at scale, manager memory), each against a baseline of the same run; prints one table.
	./hack/bench.sh

.PHONY: bench-scale
bench-scale: ## The curve of docs/performance.md: memory, admission and requests at 100-2,000 Clusters (about 25 minutes); rewrites its table and plot.
	./hack/bench-scale.sh

.PHONY: testbed
testbed: ## Install (once, as root) and start the OpenStack test bed on 127.0.0.1; prints clouds.yaml's path.
	hack/openstack-testbed/testbed.sh install
	hack/openstack-testbed/testbed.sh start
	hack/openstack-testbed/testbed.sh clouds

.PHONY: testbed-stop
testbed-stop: ## Stop the OpenStack test bed.
	hack/openstack-testbed/testbed.sh stop

.PHONY: test-e2e-kind
test-e2e-kind: ## Run the kind e2e suite against a real OpenStack (needs Docker; docs/e2e.md).
	go test ./e2e/kind -timeout 3h -v -args -e2e.config=$(ROOT)/e2e/kind/config/e2e.yaml -e2e.artifacts-folder=$(ROOT)/_artifacts/e2e-kind

##@ Build

.PHONY: build
build: ## Build the manager binary as the Dockerfile does.
	CGO_ENABLED=0 go build $(GO_BUILD_FLAGS) -o $(BIN)/manager .

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine).
	docker build --build-arg GOPROXY=$$(go env GOPROXY) --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd from source into bin/k8s (once).
	./hack/ensure-envtest-assets.sh >/dev/null

RELEASE_VERSION ?= v0.1.0
RELEASE_DIR ?= $(ROOT)/_artifacts/release
.PHONY: release-manifests
release-manifests: $(KUSTOMIZE) ## Build the clusterctl release assets (components, metadata, templates) into _artifacts/release.
	KUSTOMIZE=$(KUSTOMIZE) ./hack/release-manifests.sh $(RELEASE_VERSION) $(RELEASE_DIR)

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRDs, RBAC and the variable schema from the Go types, then docs/reference.md.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=false paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) crd paths=./internal/variables/... output:crd:stdout > internal/variables/zz_generated.schema.yaml
	go run ./hack/tools/reference-docs

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Lint: golangci-lint (.golangci.yml) and kube-api-linter on api/ (.golangci-kal.yml).
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --config .golangci-kal.yml ./api/...

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Apply the fixes golangci-lint and kube-api-linter suggest.
	$(GOLANGCI_LINT) run --fix ./...
	$(GOLANGCI_LINT) run --fix --config .golangci-kal.yml ./api/...

.PHONY: verify
verify: verify-generate ## Fail when generated files, go.mod/go.sum (and hack/tools/k8s's build list against it), the licence headers or the shell scripts (shellcheck) are not what they should be.
	go mod tidy -diff
	cd hack/tools/k8s && go mod tidy -diff
	./hack/verify-k8s-build-list.sh
	go test -count=1 ./test/shipping -run 'TestEveryGoFileCarriesTheLicenceHeader'
	"$$(./hack/ensure-shellcheck.sh)" hack/*.sh hack/*/*.sh .ci/run

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files are not up to date.
	@git diff --exit-code -- api config internal/variables docs/reference.md || (echo "run 'make generate' and commit the result" && exit 1)

$(CONTROLLER_GEN):
	GOBIN=$(TOOLS) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/controller-gen $@

$(GOLANGCI_LINT): hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum hack/tools/golangci-lint/main.go
	mkdir -p $(TOOLS)
	cd hack/tools/golangci-lint && go build -trimpath -o $@.tmp . && mv $@.tmp $@

$(KUSTOMIZE):
	GOBIN=$(TOOLS) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(TOOLS)/kustomize $@

# Karpenter with a policy layer. `make run` starts a local cluster with the controller;
# `make test` runs everything CI runs. `make help` lists the rest.

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

# Go test parallelism: the reference machine has 2 cores.
GO_TEST_P ?= 2
GO_TEST_FLAGS ?=
# MANAGERS is how many managers `make run` (and run-aws, run-argocd) starts; two or more elect a leader.
MANAGERS ?= 1
CONTROLLER_GEN = go tool -modfile=hack/tools/codegen/go.mod controller-gen
CONVERTED_CRDS = config/crd/bases/karpenter.sh_nodepools.yaml \
	config/crd/bases/karpenter.sh_nodeclaims.yaml \
	config/crd/bases/karpenter.k8s.aws_ec2nodeclasses.yaml
# Packages whose tests need no API server.
UNIT_PKGS = $$(go list ./... | grep -v -e /test/integration -e /test/e2e)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate DeepCopy methods with controller-gen.
	$(CONTROLLER_GEN) object paths="./api/..."

# The AWS provider's built-in on-demand prices (used until, or instead of, the Pricing API):
# from the EC2 catalog in testdata/, or PRICING_REGION=<region> to read
# the Pricing API with the usual AWS credentials.
PRICING_CATALOG ?= testdata/aws-instance-types.json
.PHONY: pricing-table
pricing-table: ## Regenerate providers/aws/zz_generated.pricing.go.
	go run ./hack/pricing-table $(if $(PRICING_REGION),-from-api $(PRICING_REGION),-catalog $(PRICING_CATALOG))

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook configurations with controller-gen.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/...;./cmd/...;./controllers/...;./webhooks/...;./cloudprovider/...;./providers/..." output:crd:artifacts:config=config/crd/bases
	hack/openreports-crds.sh
	hack/crd-conversion.sh $(CONVERTED_CRDS)
	hack/crd-taint-patterns.sh config/crd/bases/karpenter.sh_nodeclaims.yaml
	hack/crd-chart.sh
	hack/controller-chart.sh

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint (built from hack/tools/golangci) with the dependency rules.
	go tool -modfile=hack/tools/golangci/go.mod golangci-lint run ./...

.PHONY: verify
verify: ## Fail if generated code, go.mod or formatting is out of date, a binary is tracked, or lint finds something.
	hack/verify.sh

##@ Test

.PHONY: test
test: ## Everything CI runs: verify, vet, unit tests, envtest suites, e2e (with timings).
	hack/phases.sh verify vet unit fuzz-short envtest e2e

.PHONY: unit
unit: ## Unit tests (no API server).
	go test -p $(GO_TEST_P) $(GO_TEST_FLAGS) $(UNIT_PKGS)

# Go fuzz targets over what a stranger or a pull request can send: the webhooks' AdmissionReview
# and ConversionReview bodies, and karpenterctl on arbitrary YAML. Seed corpora are under each
# package's testdata/fuzz (and the repository's manifests); new failing inputs land there too.
# The third field is the number of executions make test gives the target (a few seconds each
# here; see hack/fuzz.sh for why a count and not a duration).
FUZZ_TARGETS = ./webhooks:FuzzAdmissionReview:30000x ./webhooks:FuzzConversionReview:30000x ./cmd/karpenterctl:FuzzCLI:1500x
FUZZTIME ?= 5m

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME each (default 5m).
	@hack/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

.PHONY: fuzz-short
fuzz-short: ## Fuzz every target for a fixed number of executions, a few seconds each (part of make test).
	@hack/fuzz.sh count $(FUZZ_TARGETS)

# -timeout 30m: on a cold machine the chart suite builds helm (about 4 minutes) before its tests.
.PHONY: envtest
envtest: ## Integration suites on a real kube-apiserver and etcd (envtest).
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh)" go test -p $(GO_TEST_P) $(GO_TEST_FLAGS) -timeout 30m ./test/integration/...

# E2E_LANES suite processes run at once, each with its own local cluster on its own loopback
# ports; hack/e2e-lanes spreads the tests over them by test/e2e/durations.json (E2E_RECORD=1
# writes this run's times back) and prints the whole log of a failed one. E2E_RUN picks tests
# by regular expression. Every run builds the manager and the suites anew.
E2E_LANES ?= 3
.PHONY: e2e
e2e: ## End-to-end suites in E2E_LANES parallel lanes: the manager against local clusters like make run's, started by the tests.
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh)" go run ./hack/e2e-lanes -lanes $(E2E_LANES) $(if $(E2E_RECORD),-record)

# SEED replays a chaos or soak run (each prints its seed); 0 picks one. DURATION is the soak's length.
SEED ?= 0
DURATION ?= 1h

.PHONY: upstream-e2e
upstream-e2e: ## Upstream Karpenter v1.15.0's regression and disruption suites against the local stack on its own ports: a line per spec, then N passed, M failed, K skipped (not in make test: it runs long).
	hack/upstream-e2e.sh

.PHONY: chaos
chaos: ## The chaos suite at full size: 500 pods, the leader SIGKILLed at random, kube-apiserver and etcd restarted, launches failing (make test runs its short form).
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh)" go test -count=1 -v -timeout 90m ./test/e2e/chaos -args -chaos.full -chaos.seed=$(SEED)

.PHONY: soak
soak: ## Random scale-ups and -downs for DURATION (default 1h) on two managers: the leader's goroutines and heap stay flat, nothing leaks.
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh)" go test -count=1 -v -timeout 24h ./test/e2e/chaos -run TestSoak -args -soak.duration=$(DURATION) -chaos.seed=$(SEED)

.PHONY: kube-binaries
kube-binaries: ## Build (or find in the cache) kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok.
	@hack/kube-binaries.sh

##@ Run

.PHONY: build
build: ## Build the manager and the CLI into bin/.
	go build -o bin/ ./cmd/...

.PHONY: run
run: build ## Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the manager on loopback (MANAGERS=2: two, under leader election).
	go build -o bin/local-up ./hack/local-up
	bin/local-up -managers=$(MANAGERS)

.PHONY: run-aws
run-aws: build ## Like run, but the manager runs --cloud-provider=aws against a local AWS emulator (moto) whose instances get Nodes.
	go build -o bin/local-up ./hack/local-up
	bin/local-up -cloud-provider=aws -managers=$(MANAGERS)

.PHONY: run-argocd
run-argocd: build ## Like run, plus ArgoCD (built from Go modules) syncing the samples from a local Git repository whose clone is .local/gitops.
	go build -o bin/local-up ./hack/local-up
	bin/local-up -argocd -managers=$(MANAGERS)

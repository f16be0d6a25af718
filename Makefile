# CAPTF Makefile. Every tool and test binary is built from source the first time it is needed, at
# the versions pinned in hack/versions.mk, into a per-user cache outside the clone that bin/
# (git-ignored) links to (hack/build-bin.sh).
include hack/versions.mk

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
BIN := $(CURDIR)/bin
STAMPS := $(BIN)/.stamps
export BIN_DIR := $(BIN)
export KUBERNETES_VERSION ETCD_VERSION CONTROLLER_TOOLS_VERSION CLUSTER_API_VERSION OPENTOFU_VERSION KUSTOMIZE_VERSION GOLANGCI_LINT_VERSION
export TERRAFORM_VERSION TERRAFORM_NESTED_VERSION PROMETHEUS_VERSION PROMETHEUS_RELEASE VERSITYGW_VERSION
# envtest finds etcd and kube-apiserver here.
export KUBEBUILDER_ASSETS := $(BIN)
# envtest gives kube-apiserver 20 s to become ready; on 2 cores with the suites running in
# parallel it has taken longer, which failed a suite before any test ran.
KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 2m
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT

CONTROLLER_GEN := $(BIN)/controller-gen
PROMTOOL := $(BIN)/promtool
GOLANGCI_LINT := $(BIN)/golangci-lint
# The two binaries the runner's integration tests and the end-to-end suite run, each by absolute
# path: OpenTofu always built from source into bin/, Terraform from PATH or else built from source
# into bin/. A test that needs one of them fails when its variable is unset or names no binary.
TERRAFORM_ON_PATH := $(shell command -v terraform 2>/dev/null)
CAPTF_TEST_TOFU ?= $(BIN)/tofu
CAPTF_TEST_TERRAFORM ?= $(or $(TERRAFORM_ON_PATH),$(BIN)/terraform)
export CAPTF_TEST_TOFU CAPTF_TEST_TERRAFORM
# The provider the network mirror tests install (test/tfregistry), built from source.
CAPTF_TEST_ECHO_PROVIDER ?= $(BIN)/terraform-provider-echo
export CAPTF_TEST_ECHO_PROVIDER
# The timeout bounds each package's test binary; the longest is the e2e suite (about 45 minutes
# alone on 2 cores, with the rollout, HA and upgrade, replica and certificate rotation specs).
GO_TEST_FLAGS ?= -count=1 -timeout 75m
# Packages whose tests run in `make test`.
TEST_PKGS ?= ./...

.PHONY: all
all: build

##@ Development

.PHONY: generate
generate: $(STAMPS)/controller-gen-$(CONTROLLER_TOOLS_VERSION) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(STAMPS)/controller-gen-$(CONTROLLER_TOOLS_VERSION) ## Generate CRDs, RBAC and webhook manifests.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@if grep -rqs '+kubebuilder:rbac' controllers cmd; then \
	  $(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... paths=./cmd/... output:rbac:artifacts:config=config/rbac; fi
	@if ls webhooks/*.go >/dev/null 2>&1; then \
	  $(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:artifacts:config=config/webhook; fi

.PHONY: verify-gen
verify-gen: generate manifests ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
	  echo "generated files are stale; run 'make generate manifests' and commit:"; \
	  git status --porcelain -- api config; git --no-pager diff --stat -- api config; exit 1; fi
	@echo "generated files are up to date"

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet and check gofmt.
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: build
build: ## Build the manager, the runner, the sandbox and the kubectl plugin (bin/kubectl-captf, and its completion bin/kubectl_complete-captf).
	@mkdir -p $(BIN)
	for c in $$(ls cmd); do go build -o $(BIN)/$$c ./cmd/$$c; done
	install -m 0755 hack/krew/kubectl_complete-captf $(BIN)/kubectl_complete-captf

.PHONY: lint
lint: $(STAMPS)/golangci-lint-$(GOLANGCI_LINT_VERSION) ## Run golangci-lint with .golangci.yml: import boundaries (depguard), staticcheck, govet, errcheck, logr checks.
	$(GOLANGCI_LINT) run ./...

##@ Test

.PHONY: test-bins
test-bins: $(STAMPS)/etcd-$(ETCD_VERSION) $(STAMPS)/kubernetes-$(KUBERNETES_VERSION) test-runtime-bins $(STAMPS)/promtool-$(PROMETHEUS_VERSION) ## Build etcd, the Kubernetes binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and promtool from source (once per machine: hack/build-bin.sh keeps them in a per-user cache), bin/tofu, and terraform when none is on PATH.

.PHONY: test-runtime-bins
test-runtime-bins: $(STAMPS)/tofu-$(OPENTOFU_VERSION) ## Both binaries the tests run: bin/tofu (built from source, once) and terraform (PATH, else built from source into bin/); and the provider the network mirror tests install (bin/terraform-provider-echo).
	@if [ "$(CAPTF_TEST_TERRAFORM)" = "$(BIN)/terraform" ]; then $(MAKE) --no-print-directory $(STAMPS)/terraform-$(TERRAFORM_VERSION); fi
	@# Links from the tool cache, or builds when its source changed (the version is its digest).
	@hack/build-bin.sh echo-provider
	@for b in "$(CAPTF_TEST_TOFU)" "$(CAPTF_TEST_TERRAFORM)"; do \
	  if [ ! -x "$$b" ]; then echo "test-runtime-bins: $$b is missing or not executable; the tests run both OpenTofu and Terraform"; exit 1; fi; \
	  echo "test-runtime-bins: $$b ($$("$$b" version 2>/dev/null | head -1))"; done

.PHONY: kubectl-bin
kubectl-bin: $(STAMPS)/kubernetes-$(KUBERNETES_VERSION) ## Build kubectl from source (once): the webhook tests run it against envtest.

.PHONY: runtime-bin
runtime-bin: ## Make sure the runner's integration tests have terraform or tofu: build bin/tofu only if none exists.
	@if [ -x $(BIN)/tofu ]; then echo "runtime-bin: $(BIN)/tofu"; \
	elif p=$$(command -v tofu || command -v terraform); then echo "runtime-bin: $$p"; \
	else $(MAKE) --no-print-directory $(STAMPS)/tofu-$(OPENTOFU_VERSION); fi

.PHONY: test
test: test-bins vet test-rules ## Unit and envtest suites against the source-built kube-apiserver, and the alerts' unit tests.
	go test -v $(GO_TEST_FLAGS) $(TEST_PKGS) 2>&1 | hack/test-summary.sh

# The PrometheusRule's spec is a plain Prometheus rule file indented by two spaces: it is written
# out as one into a temporary folder beside copies of the test files, which name it rules.yaml.
.PHONY: test-rules
test-rules: $(STAMPS)/promtool-$(PROMETHEUS_VERSION) ## Unit-test the alerts of config/prometheus/rules.yaml with promtool (config/prometheus/tests).
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  awk 'on { if ($$0 !~ /^(  |$$)/) { print "rules.yaml: a line under spec: is not indented: " $$0 > "/dev/stderr"; exit 1 }; sub(/^  /, ""); print } /^spec:$$/ { on = 1 }' \
	    config/prometheus/rules.yaml > "$$tmp/rules.yaml"; \
	  cp config/prometheus/tests/*.yaml "$$tmp/"; \
	  $(PROMTOOL) check rules "$$tmp/rules.yaml"; \
	  $(PROMTOOL) test rules $$(for f in config/prometheus/tests/*.yaml; do echo "$$tmp/$$(basename $$f)"; done)

.PHONY: bench
bench: test-bins test-runtime-bins ## Benchmarks: requests per pass and heap (test/bench), 1,000 TerraformMachines at once in the sandbox against the floor of as many runner executions with no controller (test/fleetbench; CAPTF_BENCH_FLEET_N for fewer), the guards' admission latency (webhooks), a sample apply per binary through the state channel against the kubernetes backend (cmd/runner).
	go test -run '^$$' -bench . -benchtime=1x -timeout 120m ./test/bench/
	go test -run '^$$' -bench . -benchtime=1x -timeout 120m ./test/fleetbench/
	go test -run '^$$' -bench BenchmarkGuard -benchtime=3s -timeout 20m ./webhooks/
	go test -run '^$$' -bench . -benchtime=5x -timeout 20m ./cmd/runner/

##@ Soak

# make soak runs the chaos soak of test/chaos (soak_test.go): SCHEDULES seeded object lifecycles
# (create, input change, pause, state loss and restore, delete, re-create, delete), many at
# once against one API server, two managers without leader election, stale caches, failing and
# lost writes, conflicts and crashes, the monitor checking I1-I5 and I7. SEED is the seed of
# schedule 0 (default: the time; printed); a failure prints the seed and the command that
# replays it. SOAK_PARALLEL is the schedules in flight (default 96), SOAK_CELL the schedules per
# namespace (default 4), SOAK_TIMEOUT bounds the run, go test's and Ginkgo's suite timeout alike (15 to 23 schedules a minute on a shared
# 2-core machine: 10,000 schedules take 7 to 11 hours). docs/development.md ("Soak", "Speed")
# has the figures of the last runs; the summary prints the wall time and schedules per minute.
SCHEDULES ?= 300
SEED ?=
SOAK_PARALLEL ?=
SOAK_CELL ?=
SOAK_LOG_DIR ?=
SOAK_TIMEOUT ?= 12h

.PHONY: soak
soak: test-bins ## Chaos soak over SCHEDULES seeded schedules (SEED=<n> replays one); prints Jobs, faults by type, lags, violations, wall time and schedules per minute; fails on any violation.
	CAPTF_SOAK_SCHEDULES=$(SCHEDULES) CAPTF_SOAK_SEED=$(SEED) CAPTF_SOAK_PARALLEL=$(SOAK_PARALLEL) CAPTF_SOAK_CELL=$(SOAK_CELL) CAPTF_SOAK_LOG_DIR=$(SOAK_LOG_DIR) \
	  go test -count=1 -timeout $(SOAK_TIMEOUT) ./test/chaos/ -v -ginkgo.timeout=$(SOAK_TIMEOUT) -ginkgo.label-filter=soak -ginkgo.succinct

##@ Simulation

# make sim runs test/sim's deterministic simulation (TestSim): SCHEDULES seeded fault schedules
# from SEED (default: from the time; printed), each one TerraformCluster's life in its own
# testing/synctest bubble (two managers, kills, API faults, cache lag, pause, delete, Job runs
# that crash, are killed or overrun), checked with test/monitor's invariants; prints schedules,
# violations, unconverged, schedules per hour and the first failing seed with its replay
# (make sim SEED=<seed> SCHEDULES=1 gives the same trace, line for line). make test runs a slice.
.PHONY: sim
sim: ## Deterministic simulation over SCHEDULES seeded fault schedules from SEED; prints violations, unconverged, schedules per hour and the replay of the first failing seed.
	CAPTF_SIM=1 CAPTF_SIM_SEED=$(SEED) CAPTF_SIM_SCHEDULES=$(SCHEDULES) CAPTF_SIM_GUARD=$(GUARD) go test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSim$$' -v ./test/sim/

##@ Mutation testing

# make mutate applies each mutation of hack/mutations/*.txt alone to a scratch copy of HEAD and
# runs the test it names (hack/mutate/doc.go; docs/mutation-report.md). MUTATIONS=<globs> runs
# a subset (comma-separated, by name or <list>/<name>, for example MUTATIONS='decide/*');
# MUTATE_REPORT=<file> also writes the Markdown report there; MUTATE_ARGS passes more flags
# (bin/mutate -h: -list, -from=worktree, -baseline=false, -timeout, -logs).
MUTATIONS ?=
MUTATE_REPORT ?=
MUTATE_ARGS ?=
# The CI slice (make mutate-ci): the mutations killed by unit tests and the exhaustive Decide
# test, no API server: every guard rule of webhooks' pure functions, the run lease's freeness
# rules, the engine's fake-client and plan rules, the runner's restore lineage, the chaos
# monitor's drift checks, the identity-token audience rule, the waiting plan's conditions, the
# abandon that predates a deletion, the rules of the CLI configuration, the pod template, the
# scoped identities (three of them through the webhook's envtest suite) and image pulls, the
# tenants' edit role (two, through the deploy suite's render of the release), and two Decide clauses (the rest of decide.txt runs about a minute
# each: make mutate MUTATIONS='decide/*').
# It fits in about 10 minutes on a 2-core machine (docs/mutation-report.md).
MUTATE_CI ?= guard-blockmove-removal-is-guarded, guard-finalizer-removal-is-guarded, \
  guard-activejob-clear-is-guarded, guard-activejob-replace-is-guarded, \
  records-create-judges-manager-keys, records-create-requests-reach-the-guard, records-change-is-judged, \
  records-state-first-run-on-update, records-applied-hash-on-update, records-cel-list-equals-go-list, \
  templates-refuse-records, manager-group-flags-are-trimmed, \
  guard-replace-only-with-the-lease-holder, guard-lease-inside-the-grace-blocks, \
  guard-old-activejob-blocks-down-to-its-pods, guard-fails-closed, guard-override-needs-a-group-member, \
  leaseguard-duration-change-is-judged, jobguard-label-value-change, jobstatus-runs-while-a-pod-runs, \
  lease-backstop-floor, lease-backstop-age-clamp, lease-running-holder-is-live, \
  lease-finished-holder-with-a-running-pod-is-live, lease-grace-blocks, lease-jobof-by-owner-reference, \
  jobstatus-failure-target-is-not-finished, engine-finished-job-pods-read-live, \
  engine-cleanup-waits-for-a-live-lease, drift-prune-never-a-running-job, \
  state-never-adopts-an-earlier-incarnations-job, plans-engine-supersede, plans-engine-applied-once, \
  runner-restore-refuses-another-lineage, decide-running-job-wins, decide-statelost-hold, \
  drift-monitor-checks-i7, drift-monitor-counts-drift-jobs, state-monitor-refusal-needs-a-lineage, monitor-counts-the-pods-of-a-run, \
  drift-jitter-spreads-the-checks, drift-overdue-checks-spread-after-a-restart, slots-read-the-cache-under-the-lock, \
  slots-unknown-create-keeps-its-slot, drift-prune-waits-for-the-pods, \
  identity-audience-accepted-is-refused, identity-audience-wellknown-filter, \
  plans-waiting-plan-is-false, plans-waiting-plan-keeps-ready, \
  plans-corrupt-never-applies, plans-verdict-stays, plans-digest-compares-record, plans-digest-compares-json, \
  plans-show-verifies-artifacts, plans-result-carries-digests, \
  abandon-set-before-the-deletion-does-not-skip-the-destroy, stateid-move-may-drop-the-record, \
  refresh-plan-is-no-apply-plan, refresh-answers-only-its-request, lease-orphaned-pod-of-the-owner-is-live, \
  stateid-first-run-is-not-retained, stateid-first-run-mark-names-the-incarnation, \
  inputs-record-needs-the-same-sources, inputs-idle-objects-trust-the-record, shard-own-leader-election, \
  planpolicy-violation-holds-the-plan, planpolicy-json-lists-every-change, planjson-masks-sensitive-values, \
  drift-check-request-starts-a-check, pool-instances-within-the-provider-id-list, \
  pool-instances-cover-the-provider-id-list, pool-instances-cleared-with-the-output, \
  health-threshold-counts, health-threshold-inclusive, health-ready-signal, \
  cliconfig-admission-refuses-invalid-host, cliconfig-host-must-be-a-dns-name, cliconfig-host-port-in-range, \
  cliconfig-build-refuses-invalid-host, cliconfig-token-env-spelling, cliconfig-tf-names-stay-reserved, \
  cliconfig-source-must-opt-in, placement-build-validates, placement-reserved-label, \
  modulesecrets-label-required, modulesecrets-token-type-refused, \
  modulesecrets-token-annotation-refused, modulesecrets-pod-names-only-copies, modulesecrets-admission-refuses, \
  modulesecrets-variables-judged, runner-redacts-registry-tokens, identity-ref-unset-allows-none, identity-ref-selector-must-match, \
  identity-ref-empty-selector-matches-none, identity-ref-reserved-env-refused, identity-ref-build-refuses-reserved-env, \
  identity-ref-env-main-container-only, identity-ref-job-marked, identity-ref-admission-refuses, \
  image-registry-basic-auth, image-node-credentials-of-the-registry, image-decide-reads-pending-pods, \
  image-decide-sets-the-condition, tenant-edit-grants-no-status, tenant-edit-grants-no-secrets, \
  startblock-deletion-deletes-a-never-started-job, startblock-delete-needs-the-never-started-proof, \
  startblock-grace-before-a-healing-block-counts, startblock-a-main-container-that-ran-is-not-never-started, \
  records-move-mark-needs-a-writer, records-move-mark-is-seen, jobstatus-runs-template-compares-images, \
  destroyplan-judged-deletion-plans, destroyplan-manual-asks, destroyplan-verdict-stays, destroyplan-applies-only-approved, \
  destroyplan-corrupt-holds, destroyplan-superseded-by-state, destroyplan-spent-never-again, destroyplan-break-glass-honoured, \
  destroyplan-apply-never-applies-it, destroyplan-kind-rule, destroyplan-runner-plans-destroy, records-contract-fields-are-judged, \
  guard-finalizer-of-an-object-that-may-own-infrastructure, guard-finalizer-a-started-job-may-own, \
  targeted-waits-for-the-running-job, targeted-manual-plans-first, targeted-plan-of-another-request, \
  targeted-plan-record-bound-to-its-job

.PHONY: mutate
mutate: test-bins ## Run every mutation proof of hack/mutations/*.txt (well over an hour); fails unless each is KILLED by a named test. MUTATIONS=<globs> for a subset.
	go build -o $(BIN)/mutate ./hack/mutate
	$(BIN)/mutate $(if $(MUTATIONS),-only '$(MUTATIONS)') $(if $(MUTATE_REPORT),-report '$(MUTATE_REPORT)') $(MUTATE_ARGS)

.PHONY: mutate-ci
mutate-ci: ## The fast slice of make mutate for CI: MUTATE_CI's mutations, killed by unit tests and the exhaustive Decide test (no baseline run: make test runs those tests unmutated).
	go build -o $(BIN)/mutate ./hack/mutate
	$(BIN)/mutate -only '$(MUTATE_CI)' -baseline=false $(MUTATE_ARGS)

##@ Run

# make run SAMPLES=1 also applies config/samples; SANDBOX_ARGS passes more flags (bin/sandbox -h).
SAMPLES ?=
SANDBOX_ARGS ?=
# make run-manager passes MANAGER_ARGS to the manager (bin/manager -h).
MANAGER_ARGS ?=

.PHONY: run
run: sandbox-bins build $(if $(REPLICA),$(STAMPS)/versitygw-$(VERSITYGW_VERSION)) ## Start the local sandbox in the foreground (control plane, manager, webhooks, Job executor); SAMPLES=1 applies config/samples; REPLICA=1 keeps the state replica in a local S3 store over bin/sandbox-replica. Ctrl-C stops it.
	$(BIN)/sandbox --kubeconfig=$(BIN)/sandbox.kubeconfig $(if $(SAMPLES),--apply-samples) $(if $(REPLICA),--state-replica-dir=$(BIN)/sandbox-replica) $(SANDBOX_ARGS)

.PHONY: run-manager
run-manager: build ## Run the manager against the cluster KUBECONFIG points at (webhooks off unless MANAGER_ARGS turns them on).
	@if [ -z "$$KUBECONFIG" ]; then echo "run-manager: set KUBECONFIG to the management cluster's kubeconfig"; exit 2; fi
	$(BIN)/manager --metrics-bind-address=0 --enable-webhooks=false $(MANAGER_ARGS)

.PHONY: sandbox-bins
sandbox-bins: $(STAMPS)/etcd-$(ETCD_VERSION) $(STAMPS)/kubernetes-$(KUBERNETES_VERSION) $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) $(STAMPS)/cluster-api-$(CLUSTER_API_VERSION) cert-manager-bin runtime-bin ## What the sandbox needs: the control plane, kubectl, kustomize (renders config/default), the Cluster API managers, cert-manager's controllers, terraform or tofu.

.PHONY: test-e2e
test-e2e: sandbox-bins test-runtime-bins $(STAMPS)/cluster-api-$(CLUSTER_API_VERSION) ## End-to-end tests: sandboxes, real terraform/tofu, kubectl, clusterctl move (about 3 minutes; part of make test too).
	go test -v -timeout 20m ./test/e2e/... -ginkgo.v 2>&1 | hack/test-summary.sh

# make test runs ./... and so the end-to-end suite: it needs what the sandbox needs.
test-bins: sandbox-bins $(STAMPS)/cluster-api-$(CLUSTER_API_VERSION)

##@ Tools (built from source into bin/)

$(STAMPS)/controller-gen-$(CONTROLLER_TOOLS_VERSION):
	hack/build-bin.sh controller-gen
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/etcd-$(ETCD_VERSION):
	hack/build-bin.sh etcd
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/kubernetes-$(KUBERNETES_VERSION):
	hack/build-bin.sh kubernetes
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/cluster-api-$(CLUSTER_API_VERSION):
	hack/build-bin.sh cluster-api
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/tofu-$(OPENTOFU_VERSION):
	hack/build-bin.sh tofu
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/terraform-$(TERRAFORM_VERSION):
	hack/build-bin.sh terraform
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/promtool-$(PROMETHEUS_VERSION):
	hack/build-bin.sh promtool
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/golangci-lint-$(GOLANGCI_LINT_VERSION):
	hack/build-bin.sh golangci-lint
	@mkdir -p $(STAMPS) && touch $@

##@ Release

KUSTOMIZE := $(BIN)/kustomize
# The release the clusterctl manifest names; metadata.yaml must hold its major.minor series.
RELEASE_TAG ?= v0.1.0
RELEASE_IMAGE ?= ghcr.io/captf/cluster-api-provider-terraform:$(RELEASE_TAG)
RELEASE_DIR ?= out
# The platforms release-plugin builds ("linux/amd64 ..."); empty: every platform of hack/krew/captf.yaml.
PLUGIN_PLATFORMS ?=

.PHONY: release-manifests
release-manifests: $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) ## Write the clusterctl provider files into out/ (infrastructure-components.yaml, metadata.yaml, the two flavors and the ClusterClass).
	@mkdir -p $(RELEASE_DIR)
	$(KUSTOMIZE) build config/clusterctl | sed 's|CAPTF_RELEASE_IMAGE|$(RELEASE_IMAGE)|g' > $(RELEASE_DIR)/infrastructure-components.yaml
	cp metadata.yaml $(RELEASE_DIR)/metadata.yaml
	cp templates/cluster-template.yaml templates/cluster-template-topology.yaml templates/clusterclass-captf.yaml $(RELEASE_DIR)/
	@echo "wrote $(RELEASE_DIR)/infrastructure-components.yaml, metadata.yaml, cluster-template.yaml, cluster-template-topology.yaml and clusterclass-captf.yaml ($(RELEASE_IMAGE))"

.PHONY: release-plugin
release-plugin: ## Build kubectl-captf for every krew platform into out/ and write out/captf.yaml (the krew manifest, hack/krew/captf.yaml, with the tag and SHA-256s).
	hack/krew/release.sh $(RELEASE_DIR) $(RELEASE_TAG) $(PLUGIN_PLATFORMS)

.PHONY: kustomize
kustomize: $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) ## Build kustomize into bin/.

.PHONY: clusterctl
clusterctl: $(STAMPS)/cluster-api-$(CLUSTER_API_VERSION) ## Build clusterctl and the Cluster API core manager (bin/capi-manager) from source into bin/.

# The deployment tests (test/deploy) render config/ with kustomize and install the release
# manifest through a real clusterctl.
test-bins: $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) $(STAMPS)/cluster-api-$(CLUSTER_API_VERSION)

$(STAMPS)/kustomize-$(KUSTOMIZE_VERSION):
	hack/build-bin.sh kustomize
	@mkdir -p $(STAMPS) && touch $@

# The state replica's tests (test/sandbox/objectstore) run a real S3-compatible store.
test-bins: $(STAMPS)/versitygw-$(VERSITYGW_VERSION)

$(STAMPS)/versitygw-$(VERSITYGW_VERSION):
	hack/build-bin.sh versitygw
	@mkdir -p $(STAMPS) && touch $@

# cert-manager's own controllers (test/certmanager; issue 45), at the version go.mod pins: linked
# from the tool cache, or built when go.mod, go.sum or the wiring changed (the version is their digest).
.PHONY: cert-manager-bin
test-bins: cert-manager-bin
cert-manager-bin: ## Build cert-manager's controllers (bin/cert-manager-controllers, test/certmanager) from the module go.mod pins.
	@CERT_MANAGER_VERSION=$(CERT_MANAGER_VERSION) hack/build-bin.sh cert-manager

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

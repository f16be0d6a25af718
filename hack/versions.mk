# Pinned versions of every tool and test binary the Makefile builds from source.
# This is the one place to change them; hack/build-bin.sh reads them from the environment.
KUBERNETES_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
CONTROLLER_TOOLS_VERSION ?= v0.21.0
CLUSTER_API_VERSION ?= v1.14.2
OPENTOFU_VERSION ?= v1.10.10
KUSTOMIZE_VERSION ?= v5.8.2
CERT_MANAGER_VERSION ?= v1.21.2
# Terraform is built from source only when no terraform is on PATH (make test runs both binaries).
TERRAFORM_VERSION ?= v1.11.4
# The pseudo-version of TERRAFORM_VERSION's release commit, at which the proxy serves
# hashicorp/terraform's unpublished nested modules (see hack/build-bin.sh terraform); its date is
# the release's (go list -m -json github.com/hashicorp/terraform@TERRAFORM_VERSION shows "Time").
TERRAFORM_NESTED_VERSION ?= v0.0.0-20250409131005-35645b8fca68
GOLANGCI_LINT_VERSION ?= v2.15.0
# promtool (make test runs `promtool test rules` on config/prometheus/tests). Prometheus's Go
# module is versioned v0.<major><minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_VERSION ?= v0.316.0
PROMETHEUS_RELEASE ?= 3.16.0
# The S3-compatible object store the state replica's tests run against (issue 42): the Versity
# S3 gateway over a folder (its posix backend), Apache-2.0, served by the Go module proxy.
VERSITYGW_VERSION ?= v1.8.0

# Pinned versions of every tool and test binary the Makefile builds from source.
# This is the one place to change them; hack/build-bin.sh reads them from the environment.
KUBERNETES_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
CONTROLLER_TOOLS_VERSION ?= v0.21.0
CLUSTER_API_VERSION ?= v1.14.2
OPENTOFU_VERSION ?= v1.10.10
KUSTOMIZE_VERSION ?= v5.8.2
CERT_MANAGER_VERSION ?= v1.21.2

#!/usr/bin/env bash
# Builds one tool from source through the Go module proxy into a per-user cache keyed by tool and
# version, outside the clone, and links its binaries into $BIN_DIR (default bin/). A second clone,
# or a CI clone on the same machine, finds the tool in the cache and only links it.
# Modules with replace directives (etcd, kubernetes, opentofu, cluster-api) cannot be built with
# `go install pkg@version`, so each is built from a throwaway module created in a temp folder.
# Every Kubernetes binary (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) comes
# from one `go build` of several packages, so the packages they share compile once.
# Usage: hack/build-bin.sh etcd|kubernetes|cluster-api|tofu|terraform|promtool|controller-gen|golangci-lint|kustomize|versitygw|echo-provider|cert-manager
# The cache is $CAPTF_TOOLS_CACHE, else $XDG_CACHE_HOME/captf-tools, else ~/.cache/captf-tools
# (bin/.tool-cache when none of those can be written): <cache>/<tool>/<version>/<binary>.
# Remove a folder there to rebuild that tool.
set -euo pipefail
tool=${1:?tool name}
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=${BIN_DIR:-$root/bin}
cache_root=${CAPTF_TOOLS_CACHE:-}
if [ -z "$cache_root" ]; then
  if [ -n "${XDG_CACHE_HOME:-}" ]; then cache_root=$XDG_CACHE_HOME/captf-tools
  elif [ -n "${HOME:-}" ]; then cache_root=$HOME/.cache/captf-tools
  fi
fi
mkdir -p "$bin_dir"
# Without a home (or one that cannot be written), the cache lives in bin/: nothing is shared,
# but the build still works.
if [ -z "$cache_root" ] || ! mkdir -p "$cache_root" 2>/dev/null || [ ! -w "$cache_root" ]; then
  cache_root=$bin_dir/.tool-cache
  mkdir -p "$cache_root"
fi
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

# binaries and version of each tool.
case "$tool" in
etcd) version=${ETCD_VERSION:?}; binaries="etcd" ;;
kubernetes) version=${KUBERNETES_VERSION:?}; binaries="kube-apiserver kube-controller-manager kube-scheduler kubectl" ;;
cluster-api) version=${CLUSTER_API_VERSION:?}; binaries="clusterctl capi-manager capi-kubeadm-bootstrap capi-kubeadm-control-plane" ;;
tofu) version=${OPENTOFU_VERSION:?}; binaries="tofu" ;;
terraform) version=${TERRAFORM_VERSION:?}; binaries="terraform" ;;
promtool) version=${PROMETHEUS_VERSION:?}; binaries="promtool" ;;
controller-gen) version=${CONTROLLER_TOOLS_VERSION:?}; binaries="controller-gen" ;;
golangci-lint) version=${GOLANGCI_LINT_VERSION:?}; binaries="golangci-lint" ;;
kustomize) version=${KUSTOMIZE_VERSION:?}; binaries="kustomize" ;;
versitygw) version=${VERSITYGW_VERSION:?}; binaries="versitygw" ;;
# The provider the network mirror tests install: a module of its own in the repository, so its
# version is the digest of its go.mod, go.sum and source (an edit rebuilds it).
echo-provider)
  src=$root/test/tfregistry/testdata/echo-provider
  version=v1-$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16); binaries="terraform-provider-echo" ;;
# cert-manager's own controllers (test/certmanager; issue 45): CAPTF's wiring, built in CAPTF's
# module against the cert-manager version its go.mod pins (which must be CERT_MANAGER_VERSION when
# that is set). The version is that one and the digest of go.mod, go.sum and the wiring's source.
cert-manager)
  src=$root/test/certmanager/cmd/cert-manager-controllers
  cm=$(cd "$root" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
  if [ -n "${CERT_MANAGER_VERSION:-}" ] && [ "$cm" != "$CERT_MANAGER_VERSION" ]; then
    echo "cert-manager: go.mod pins $cm but hack/versions.mk says $CERT_MANAGER_VERSION; make them agree" >&2; exit 1
  fi
  version=$cm-$(cat "$root/go.mod" "$root/go.sum" "$src"/*.go | sha256sum | cut -c1-16); binaries="cert-manager-controllers" ;;
*) echo "unknown tool: $tool" >&2; exit 2 ;;
esac
cached=$cache_root/$tool/$version

link_all() {
  for b in $binaries; do ln -sfn "$cached/$b" "$bin_dir/$b"; done
  echo "$tool $version: linked $binaries into $bin_dir from $cached"
}

have_all=yes
for b in $binaries; do [ -x "$cached/$b" ] || have_all=no; done
if [ "$have_all" = yes ]; then link_all; exit 0; fi

# Build into a private folder and move it into place at the end, so a build that fails or
# runs beside another one never leaves a half-written tool in the cache.
out=$(mktemp -d "$cache_root/.build-$tool-XXXXXX")
work=$(mktemp -d)
trap 'rm -rf "$work" "$out"' EXIT
cd "$work"
began=$(date +%s)

staging_replaces() {
  # Every k8s.io/<staging> module that k8s.io/kubernetes replaces locally is pinned to the
  # matching published v0.x version, so the kubernetes module builds outside its own tree.
  local kver=$1 sver="v0${1#v1}"
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@$kver" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile" | while read -r m; do
    echo "replace $m => $m $sver"
  done
}

case "$tool" in
etcd)
  v=$version
  cat > go.mod <<MOD
module captf.local/build-etcd
go 1.26
require (
	go.etcd.io/etcd/server/v3 $v
	go.etcd.io/etcd/api/v3 $v
	go.etcd.io/etcd/client/pkg/v3 $v
	go.etcd.io/etcd/client/v3 $v
	go.etcd.io/etcd/pkg/v3 $v
)
MOD
  printf '//go:build tools\n\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy >/dev/null
  go build -o "$out/etcd" go.etcd.io/etcd/server/v3
  ;;
kubernetes)
  v=$version
  { echo "module captf.local/build-kube"; echo "go 1.26"; echo "require k8s.io/kubernetes $v"; staging_replaces "$v"; } > go.mod
  pkgs=""
  for b in $binaries; do pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
  { printf '//go:build tools\n\npackage tools\nimport (\n'; for p in $pkgs; do printf '\t_ "%s"\n' "$p"; done; printf ')\n'; } > tools.go
  go mod tidy >/dev/null
  # Stamp the version the way release builds do, so `--version` and discovery report it.
  ldflags="-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2)"
  ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$v"
  # One build of every package: with -o naming a folder, go build writes one binary per main
  # package and compiles what they share once.
  # shellcheck disable=SC2086
  go build -ldflags "$ldflags" -o "$out/" $pkgs
  ;;
cluster-api)
  # clusterctl and the Cluster API core manager (the module's core package, which Cluster API
  # ships as its manager image) in one go build, so the packages they share compile once.
  v=$version
  printf 'module captf.local/build-cluster-api\ngo 1.26\nrequire (\n\tsigs.k8s.io/cluster-api %s\n\tsigs.k8s.io/cluster-api/api %s\n)\n' "$v" "$v" > go.mod
  printf '//go:build tools\n\npackage tools\nimport (\n\t_ "sigs.k8s.io/cluster-api/cmd/clusterctl"\n\t_ "sigs.k8s.io/cluster-api/core"\n\t_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"\n\t_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"\n)\n' > tools.go
  go mod tidy >/dev/null
  mkdir -p "$work/out"
  go build -o "$work/out/" sigs.k8s.io/cluster-api/cmd/clusterctl sigs.k8s.io/cluster-api/core
  mv "$work/out/clusterctl" "$out/clusterctl"
  mv "$work/out/core" "$out/capi-manager"
  # The kubeadm bootstrap and control plane managers (both main packages are named kubeadm, so
  # each gets its own build; the packages they share with the core compile once, in the cache).
  go build -o "$out/capi-kubeadm-bootstrap" sigs.k8s.io/cluster-api/bootstrap/kubeadm
  go build -o "$out/capi-kubeadm-control-plane" sigs.k8s.io/cluster-api/controlplane/kubeadm
  ;;
tofu)
  v=$version
  modfile=$(go mod download -json "github.com/opentofu/opentofu@$v" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  { echo "module captf.local/build-tofu"; echo "go 1.26"; echo "require github.com/opentofu/opentofu $v";
    grep -E '^replace .*hcl' "$modfile" || true; } > go.mod
  printf '//go:build tools\n\npackage tools\nimport _ "github.com/opentofu/opentofu/cmd/tofu"\n' > tools.go
  go mod tidy >/dev/null
  # Stamp a release build the way OpenTofu's own releases do; otherwise it reports "-dev".
  go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$out/tofu" github.com/opentofu/opentofu/cmd/tofu
  ;;
terraform)
  # hashicorp/terraform's go.mod requires nine of its own nested modules (the remote-state
  # backends and internal/legacy) at a placeholder version and replaces them with local folders.
  # Those folders are not in the published module zip, but the proxy serves each nested module at
  # the pseudo-version of the release commit (TERRAFORM_NESTED_VERSION), so the throwaway module
  # replaces every one of them with that version.
  v=$version nested=${TERRAFORM_NESTED_VERSION:?}
  modfile=$(go mod download -json "github.com/hashicorp/terraform@$v" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  { echo "module captf.local/build-terraform"; echo "go 1.26"; echo "require github.com/hashicorp/terraform $v";
    sed -n 's#^replace \(github.com/hashicorp/terraform/[^ ]*\) => \./.*#\1#p' "$modfile" | while read -r m; do
      echo "replace $m => $m $nested"
    done; } > go.mod
  if [ "$(grep -c '^replace ' go.mod)" -eq 0 ]; then
    echo "terraform $v: found no nested-module replace directive in its go.mod; update hack/build-bin.sh" >&2; exit 1
  fi
  printf '//go:build tools\n\npackage tools\nimport _ "github.com/hashicorp/terraform"\n' > tools.go
  go mod tidy >/dev/null
  # The version comes from the module's embedded version/VERSION file; stamp a release build the
  # way HashiCorp's releases do, otherwise it reports "-dev".
  go build -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$out/terraform" github.com/hashicorp/terraform
  ;;
promtool)
  # Prometheus publishes its Go module as v0.<major><minor>.<patch> (v0.316.0 is Prometheus
  # 3.16.0). Its go.mod has no replace directive today; fail loudly if a later one adds some,
  # since a plain require would then build something other than the release.
  v=$version
  modfile=$(go mod download -json "github.com/prometheus/prometheus@$v" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  if grep -qE '^[[:space:]]*replace' "$modfile"; then
    echo "prometheus $v: its go.mod has replace directives; update hack/build-bin.sh promtool" >&2; exit 1
  fi
  { echo "module captf.local/build-promtool"; echo "go 1.26"; echo "require github.com/prometheus/prometheus $v"; } > go.mod
  printf '//go:build tools\n\npackage tools\nimport _ "github.com/prometheus/prometheus/cmd/promtool"\n' > tools.go
  go mod tidy >/dev/null
  # Stamp the release version the way Prometheus's own builds (promu) do, so --version reports it.
  ldflags="-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_RELEASE:-$v}"
  go build -trimpath -tags netgo,builtinassets -ldflags "$ldflags" -o "$out/promtool" github.com/prometheus/prometheus/cmd/promtool
  ;;
echo-provider)
  # terraform-plugin-framework and its dependencies at the versions the folder's go.sum pins.
  cp "$src/go.mod" "$src/go.sum" "$src/main.go" .
  GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$out/terraform-provider-echo" .
  ;;
controller-gen)
  GOFLAGS= GOBIN=$out go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$version" ;;
golangci-lint)
  GOFLAGS= GOBIN=$out go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version" ;;
kustomize)
  GOFLAGS= GOBIN=$out go install "sigs.k8s.io/kustomize/kustomize/v5@$version" ;;
versitygw)
  GOFLAGS= GOBIN=$out go install "github.com/versity/versitygw/cmd/versitygw@$version" ;;
cert-manager)
  (cd "$root" && GOFLAGS=-mod=readonly go build -ldflags "-s -w" -o "$out/cert-manager-controllers" ./test/certmanager/cmd/cert-manager-controllers) ;;
esac
for b in $binaries; do
  if [ ! -x "$out/$b" ]; then echo "$tool $version: the build wrote no $b" >&2; exit 1; fi
done
mkdir -p "$(dirname "$cached")"
# Another build of the same tool may have finished first: keep the first, drop this one. A
# folder from before the tool gained a binary (Cluster API's kubeadm managers) is incomplete:
# it is set aside and this build takes its place.
if ! mv -T "$out" "$cached" 2>/dev/null; then
  complete=yes
  for b in $binaries; do [ -x "$cached/$b" ] || complete=no; done
  if [ "$complete" = yes ]; then
    rm -rf "$out"
  else
    old=$(mktemp -d "$cache_root/.old-$tool-XXXXXX")
    mv -T "$cached" "$old/$version" && mv -T "$out" "$cached"
    rm -rf "$old"
  fi
fi
echo "$tool $version: built $binaries in $(( $(date +%s) - began ))s into $cached"
link_all

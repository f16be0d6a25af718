#!/usr/bin/env bash
# Builds kubectl-captf (its version set to TAG) for each platform of hack/krew/captf.yaml into
# OUT as kubectl-captf_<os>_<arch>.tar.gz, with its completion script kubectl_complete-captf,
# and writes OUT/captf.yaml with the release tag and each archive's SHA-256. Usage: hack/krew/release.sh OUT TAG [os/arch ...] (default: every platform
# the manifest lists). A platform left out keeps its SHA256_ placeholder, so a partial build is
# never mistaken for a release.
set -euo pipefail
out=$1 tag=$2
shift 2
platforms=("$@")
if [ ${#platforms[@]} -eq 0 ]; then
  platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
manifest=$(sed "s|RELEASE_TAG|$tag|g" "$here/captf.yaml")
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  dir=$(mktemp -d)
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-X main.version=$tag" -o "$dir/kubectl-captf" ./cmd/kubectl-captf
  install -m 0755 "$here/kubectl_complete-captf" "$dir/kubectl_complete-captf"
  archive="$out/kubectl-captf_${os}_${arch}.tar.gz"
  tar -C "$dir" -czf "$archive" kubectl-captf kubectl_complete-captf
  rm -rf "$dir"
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  manifest=${manifest//SHA256_${os}_${arch}/$sum}
  echo "built $archive ($sum)"
done
printf '%s\n' "$manifest" > "$out/captf.yaml"
echo "wrote $out/captf.yaml ($tag)"

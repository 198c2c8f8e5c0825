#!/usr/bin/env bash
# Builds helm from Go modules (hack/tools/helm) into a cache directory outside the
# repository, keyed by its version, the Go toolchain and a hash of the tool module, and
# prints the binary's path. A warm run only checks that the binary is there.
#
#   KARPENTER_CACHE_DIR   root of the cache (default: ${XDG_CACHE_HOME:-~/.cache}/karpenter-policy)
set -euo pipefail

HELM_VERSION=v3.22.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool="$here/tools/helm"
cache_root=${KARPENTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-policy}
mod_hash=$(cat "$tool/go.mod" "$tool/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$cache_root/helm-${HELM_VERSION}_$(go env GOVERSION)_${mod_hash}"

if [[ -x "$dir/helm" ]]; then
  echo "$dir/helm"
  exit 0
fi
mkdir -p "$cache_root"
# One build at a time per cache: a second caller waits, then finds the first one's result
# (see hack/kube-binaries.sh).
exec 9>"$cache_root/.helm.lock"
flock 9
if [[ -x "$dir/helm" ]]; then
  echo "$dir/helm"
  exit 0
fi
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "helm: building ${HELM_VERSION} (cold: a few minutes on 2 cores)" >&2
# The version stamp, as helm's own build sets it, so `helm version` and the charts'
# kubeVersion checks see the real one.
(cd "$tool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  -o "$work/helm" helm.sh/helm/v3/cmd/helm)
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir/helm"

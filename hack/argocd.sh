#!/usr/bin/env bash
# Builds ArgoCD's application controller and repo server (and a Redis for them) as one binary
# from Go modules (hack/tools/argocd) into a cache directory outside the repository, keyed by
# ArgoCD's version and a hash of the tool module, and prints the binary's path. ArgoCD v3.6
# needs Go 1.27, so this build alone runs with GOTOOLCHAIN=go1.27.3 (the go command fetches
# that toolchain from the module proxy); a warm run only checks that the binary is there.
# `hack/argocd.sh crds` prints the directory of ArgoCD's CRDs (manifests/crds of its module,
# in the Go module cache).
#
#   KARPENTER_CACHE_DIR   root of the cache (default: ${XDG_CACHE_HOME:-~/.cache}/karpenter-policy)
set -euo pipefail

ARGOCD_VERSION=v3.6.1
export GOTOOLCHAIN=go1.27.3

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool="$here/tools/argocd"
cache_root=${KARPENTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-policy}
if [[ ${1:-} == crds ]]; then
  src=$(cd "$tool" && go mod download -json "github.com/argoproj/argo-cd/v3@${ARGOCD_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  echo "$src/manifests/crds"
  exit 0
fi
mod_hash=$(cat "$tool/go.mod" "$tool/go.sum" "$tool/cmd/argocd/main.go" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$cache_root/argocd-${ARGOCD_VERSION}_${GOTOOLCHAIN}_${mod_hash}"
if [[ -x "$dir/argocd" && -x "$dir/git-verify-wrapper.sh" ]]; then
  echo "$dir/argocd"
  exit 0
fi
mkdir -p "$cache_root"
# One build at a time per cache: a second caller waits, then finds the first one's result
# (see hack/kube-binaries.sh).
exec 9>"$cache_root/.argocd.lock"
flock 9
if [[ -x "$dir/argocd" && -x "$dir/git-verify-wrapper.sh" ]]; then
  echo "$dir/argocd"
  exit 0
fi
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "argocd: building ${ARGOCD_VERSION} with ${GOTOOLCHAIN} (cold: about 7 minutes on 2 cores)" >&2
(cd "$tool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
  -ldflags "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${ARGOCD_VERSION#v}" \
  -o "$work/argocd" ./cmd/argocd)
# The repo server runs ArgoCD's git-verify-wrapper.sh for every revision, which ArgoCD's
# image has on PATH: it goes next to the binary, from ArgoCD's module.
src=$(cd "$tool" && go mod download -json "github.com/argoproj/argo-cd/v3@${ARGOCD_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
install -m 0755 "$src/hack/git-verify-wrapper.sh" "$work/git-verify-wrapper.sh"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir/argocd"

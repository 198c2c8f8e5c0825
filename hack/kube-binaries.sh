#!/usr/bin/env bash
# Builds the Kubernetes binaries that envtest, the e2e suites and `make run` need, from Go
# modules only: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
# k8s.io/kubernetes (hack/tools/kube), etcd (hack/tools/etcd) and kwok (hack/tools/kwok).
#
# They land in a cache directory outside the repository, keyed by the versions and by a hash
# of the tool modules, so a warm run only checks that the binaries are there. The directory is
# printed on stdout (use it as KUBEBUILDER_ASSETS); progress goes to stderr.
#
#   KARPENTER_CACHE_DIR   root of the cache (default: ${XDG_CACHE_HOME:-~/.cache}/karpenter-policy)
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools="$here/tools"
cache_root=${KARPENTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-policy}

# The key covers what decides the bytes of the binaries: versions, Go toolchain, tool modules.
go_version=$(go env GOVERSION)
mod_hash=$(cat "$tools"/kube/go.mod "$tools"/kube/go.sum "$tools"/etcd/go.mod "$tools"/etcd/go.sum \
  "$tools"/kwok/go.mod "$tools"/kwok/go.sum "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$cache_root/k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_${go_version}_${mod_hash}"

binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
complete=1
for b in "${binaries[@]}"; do [[ -x "$dir/$b" ]] || complete=0; done
if [[ $complete == 1 && -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi

log() { echo "kube-binaries: $*" >&2; }
mkdir -p "$cache_root"
# One build at a time per cache: a second caller (another checkout, `make run` beside
# `make test`) waits for the first and then finds the binaries, instead of building them
# again and replacing the directory under the first one's running processes.
exec 9>"$cache_root/.kube-binaries.lock"
flock 9
if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

export CGO_ENABLED=0 GOFLAGS=-mod=mod
start=$SECONDS

# Version stamps, as the Kubernetes build sets them, so that `kube-apiserver --version`
# prints the real version (clients and skew checks read it).
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=${KUBE_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor}"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date}"
done

log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ${KUBE_VERSION} (cold: ~15 min on 2 cores)"
# One go build for all four, so they share compiled packages.
(cd "$tools/kube" && go build -trimpath -ldflags "$kube_ldflags" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)

log "building etcd ${ETCD_VERSION}"
(cd "$tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3)

log "building kwok ${KWOK_VERSION}"
(cd "$tools/kwok" && go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" \
  -o "$work/kwok" sigs.k8s.io/kwok/cmd/kwok)

touch "$work/.complete"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
log "built in $((SECONDS - start))s into $dir"
echo "$dir"

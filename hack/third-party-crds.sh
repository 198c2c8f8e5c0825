#!/usr/bin/env bash
# Puts the third-party CRDs the chart's variants use into a cache directory outside the
# repository and prints it: cert-manager's (Certificate, Issuer, ...) from its module in the
# Go module cache, and prometheus-operator's ServiceMonitor and PrometheusRule rendered by controller-gen from
# its Go types (hack/tools/crds). Nothing of theirs is kept in the repository.
#
#   KARPENTER_CACHE_DIR   root of the cache (default: ${XDG_CACHE_HOME:-~/.cache}/karpenter-policy)
set -euo pipefail

CERT_MANAGER_VERSION=v1.19.1
PROMETHEUS_OPERATOR_VERSION=v0.95.2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool="$here/tools/crds"
cache_root=${KARPENTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-policy}
mod_hash=$(cat "$tool/go.mod" "$tool/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dir="$cache_root/crds_cert-manager-${CERT_MANAGER_VERSION}_prometheus-operator-${PROMETHEUS_OPERATOR_VERSION}_${mod_hash}"
if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache_root"
# One build at a time per cache: a second caller waits, then finds the first one's result
# (see hack/kube-binaries.sh).
exec 9>"$cache_root/.third-party-crds.lock"
flock 9
if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "third-party CRDs: cert-manager ${CERT_MANAGER_VERSION}, ServiceMonitor and PrometheusRule ${PROMETHEUS_OPERATOR_VERSION}" >&2
src=$(cd "$tool" && go mod download -json "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp "$src"/deploy/crds/cert-manager.io_*.yaml "$work/"
(cd "$tool" && GOFLAGS=-mod=mod go tool controller-gen crd \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir="$work/monitoring")
mv "$work/monitoring/monitoring.coreos.com_servicemonitors.yaml" "$work/monitoring/monitoring.coreos.com_prometheusrules.yaml" "$work/"
rm -rf "$work/monitoring"
touch "$work/.complete"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir"

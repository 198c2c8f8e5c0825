#!/usr/bin/env bash
# `make upstream-e2e`: upstream Karpenter's end-to-end suites (sigs.k8s.io/karpenter v1.15.0,
# test/suites/regression and test/suites/disruption) against this project's local stack.
#
# 1. Builds the suites' test binaries and the report printer from the tool module
#    hack/tools/upstream-e2e (Go module proxy; GOTOOLCHAIN=go1.26.9, as upstream v1.15 needs)
#    into a cache directory outside the repository, keyed by the tool module's hash.
# 2. Starts the local stack (bin/local-up, as `make run`) on its own ports and state directory
#    with no samples: upstream's suites want a cluster without NodePools, node classes or pods.
# 3. Runs each suite with Ginkgo's JSON report, upstream's default NodePool and
#    hack/tools/upstream-e2e/kwoknodeclass.yaml as the default node class, skipping the specs
#    hack/tools/upstream-e2e/skip.txt names (each with the reason it cannot apply here).
# 4. Prints a line per spec and `N passed, M failed, K skipped`; fails if a spec failed.
#
#   UPSTREAM_E2E_SUITES   suites to run (default "regression disruption")
#   UPSTREAM_E2E_FOCUS    a Ginkgo focus regexp (default: every spec)
#   FEATURE_GATES         the manager's gates (default: every gate built here on but the
#                         TerminateFirst ones, off as in upstream's own runs of these suites)
#   UPSTREAM_E2E_INSTANCE a small number: runs of different instances use their own state
#                         directory and ports, so that two subsets can run side by side
#                         (default 0: .local/upstream-e2e, API server on 26443)
#   KARPENTER_CACHE_DIR   root of the cache (default: ${XDG_CACHE_HOME:-~/.cache}/karpenter-policy)
set -euo pipefail

KARPENTER_VERSION=v1.15.0
GOTOOLCHAIN_UPSTREAM=go1.26.9
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
tool="$here/tools/upstream-e2e"
cache_root=${KARPENTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-policy}
suites=${UPSTREAM_E2E_SUITES:-regression disruption}
instance=${UPSTREAM_E2E_INSTANCE:-0}
if ! [[ "$instance" =~ ^[0-9]$ ]]; then
  echo "upstream-e2e: UPSTREAM_E2E_INSTANCE must be a digit, got '$instance'" >&2
  exit 2
fi
state="$root/.local/upstream-e2e"
if [[ "$instance" != 0 ]]; then state="$state-$instance"; fi

# The build's inputs: the tool module and the report printer, and the recipe below (bump
# recipe when the build commands change; the rest of this script does not touch the cache).
recipe=1
mod_hash=$( { cat "$tool/go.mod" "$tool/go.sum" "$tool/cmd/e2e-report/main.go"; echo "recipe=$recipe"; } | sha256sum | cut -c1-12)
bins="$cache_root/upstream-e2e-${KARPENTER_VERSION}_${GOTOOLCHAIN_UPSTREAM}_${mod_hash}"
mkdir -p "$cache_root"
exec 9>"$cache_root/.upstream-e2e.lock" # one build at a time per cache (see hack/kube-binaries.sh)
flock 9
if [[ ! -x "$bins/e2e-report" ]]; then
  work=$(mktemp -d "$cache_root/.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "upstream-e2e: building sigs.k8s.io/karpenter ${KARPENTER_VERSION} suites with ${GOTOOLCHAIN_UPSTREAM} (cold: about 10 minutes on 2 cores)" >&2
  for s in regression disruption; do
    (cd "$tool" && GOTOOLCHAIN=$GOTOOLCHAIN_UPSTREAM go test -c -o "$work/$s.test" "sigs.k8s.io/karpenter/test/suites/$s")
  done
  (cd "$tool" && GOTOOLCHAIN=$GOTOOLCHAIN_UPSTREAM go build -o "$work/e2e-report" ./cmd/e2e-report)
  rm -rf "$bins"
  mv "$work" "$bins"
  trap - EXIT
fi
flock -u 9

# The skip list, as one Ginkgo regexp.
skip=$(grep -v '^\s*\(#\|$\)' "$tool/skip.txt" | sed 's/ | .*//' | paste -sd '|' -)

cd "$root"
# Each instance its own binaries: a second run's build must not replace the first's manager.
bin="$state/bin"
rm -rf "$state" && mkdir -p "$state/reports" "$bin"
go build -o "$bin/" ./cmd/...
go build -o "$bin/local-up" ./hack/local-up
# The kubelet kwok plays keeps a deleted pod until its grace period ends (the deletion
# timestamp), as a kubelet does for a container that ignores SIGTERM or a preStop hook that
# outlasts the period: upstream's termination specs watch pods through that period.
# config/kwok/stages.yaml deletes at once, which keeps make test's drains short.
# A pod labelled kwok.x-k8s.io/stage=unhealthy never becomes Ready, upstream kwok's
# convention for a pod whose readiness probe fails (a PodDisruptionBudget over it stays
# unhealthy); a node so labelled keeps the conditions a spec gives it (upstream kwok's no-op
# stage), where node-initialize would make it Ready again.
awk '/^  name: pod-delete$/ { pd = 1 }
     pd && /^  next:$/ { print "  delay:\n    durationMilliseconds: 0\n    durationFrom:\n      expressionFrom: .metadata.deletionTimestamp"; pd = 0 }
     /^  name: (pod-ready|node-initialize)$/ { pr = 1 }
     pr && /^    matchExpressions:$/ { print; print "    - key: \047.metadata.labels[\"kwok.x-k8s.io/stage\"]\047\n      operator: NotIn\n      values: [unhealthy]"; pr = 0; next }
     { print }' config/kwok/stages.yaml > "$state/kwok-stages.yaml"
grep -q 'expressionFrom: .metadata.deletionTimestamp' "$state/kwok-stages.yaml" &&
  [ "$(grep -c 'kwok.x-k8s.io/stage' "$state/kwok-stages.yaml")" -eq 2 ] ||
  { echo "upstream-e2e: config/kwok/stages.yaml has no pod-delete, pod-ready or node-initialize stage to change" >&2; exit 1; }
export FEATURE_GATES=${FEATURE_GATES:-NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=true,NodeOverlay=true,StaticCapacity=true,CapacityBuffer=true}
echo "upstream-e2e: starting the local stack (FEATURE_GATES=$FEATURE_GATES); its log: $state/local-up.log" >&2
"$bin/local-up" -manager "$bin/karpenter" -kwok-stages "$state/kwok-stages.yaml" -samples none -dir "$state/cluster" -apiserver-port $((26443 + 10 * instance)) -port-base $((27000 + 1000 * instance)) > "$state/local-up.log" 2>&1 &
stack=$!
stop_stack() {
  kill -INT "$stack" 2>/dev/null || true
  wait "$stack" 2>/dev/null || true
}
trap stop_stack EXIT
until grep -q '^Local cluster is up' "$state/local-up.log"; do
  if ! kill -0 "$stack" 2>/dev/null; then
    echo "upstream-e2e: the local stack did not start; the end of its log:" >&2
    tail -20 "$state/local-up.log" >&2
    exit 1
  fi
  sleep 1
done

reports=()
for s in $suites; do
  echo "upstream-e2e: running the $s suite; Ginkgo's output: $state/$s.log" >&2
  reports+=("$state/reports/$s.json")
  KUBECONFIG="$state/cluster/kubeconfig" "$bins/$s.test" \
    -test.timeout=12h -ginkgo.timeout=12h -ginkgo.no-color -ginkgo.v \
    -ginkgo.json-report="$state/reports/$s.json" \
    ${skip:+-ginkgo.skip="$skip"} ${UPSTREAM_E2E_FOCUS:+-ginkgo.focus="$UPSTREAM_E2E_FOCUS"} \
    -default-nodeclass="$tool/kwoknodeclass.yaml" > "$state/$s.log" 2>&1 || true
done
"$bins/e2e-report" -skip "$tool/skip.txt" "${reports[@]}"

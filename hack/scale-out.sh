#!/usr/bin/env bash
# Measures a scale-out on the cluster of `make run`: three Deployments of 0.5, 0.75 and 1 CPU
# (1000 pods in all) are applied at once; it prints the time until all run, the node count
# and the manager's peak RSS, then deletes the Deployments. With --capped, pods go to a
# NodePool like the sample "general" one (on-demand, c/m/r families of generation 5 and up)
# limited to instance types of at most 8 vCPU.
#   hack/scale-out.sh [--capped]
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=${KUBECONFIG:-$PWD/.local/kubeconfig}
kubectl=bin/kubectl
selector=""
if [[ "${1:-}" == "--capped" ]]; then
  $kubectl apply -f - >/dev/null <<'YAML'
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: capped}
spec:
  weight: 100
  template:
    metadata: {labels: {pool: capped}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: ["8"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
  disruption: {consolidateAfter: 30s}
  limits: {cpu: "1000"}
YAML
  selector='nodeSelector: {karpenter.sh/nodepool: capped}'
fi
start=$(date +%s.%N)
for spec in "a 334 500m" "b 333 750m" "c 333 1"; do
  set -- $spec
  $kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: scale-$1, namespace: default}
spec:
  replicas: $2
  selector: {matchLabels: {app: scale-$1}}
  template:
    metadata: {labels: {app: scale-$1}}
    spec:
      terminationGracePeriodSeconds: 0
      $selector
      containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "$3", memory: 512Mi}}}]
YAML
done
running=0
for _ in $(seq 1 600); do
  running=$($kubectl get pods -l 'app in (scale-a,scale-b,scale-c)' --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l)
  [[ $running -ge 1000 ]] && break
  sleep 0.25
done
end=$(date +%s.%N)
pid=$(pgrep -f 'bin/karpenter --leader-elect' | head -1)
printf 'pods running: %d in %.1fs; nodes: %d; manager peak RSS: %s\n' "$running" "$(echo "$end - $start" | bc)" \
  "$($kubectl get nodes --no-headers | wc -l)" "$(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/$pid/status)"
$kubectl delete deployment scale-a scale-b scale-c --wait=false >/dev/null

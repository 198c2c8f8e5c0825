#!/usr/bin/env bash
# Measures the manager on a large idle cluster, on the cluster of `make run`
# (docs/benchmarks.md, "A large idle cluster"):
#
#   1. a NodePool "bench" of c6g.2xlarge on-demand nodes (consolidateAfter 30s), and a
#      Deployment of PODS pods of 750m and 1 GiB (ten to a node, so every node is full),
#      scaled up 1000 pods at a time, each step waited for: PODS/10 nodes; nodes launched
#      beyond that while kube-scheduler catches up are empty, and consolidation removes them;
#   2. once every pod runs and no node is empty, two minutes later, the manager's cpu over
#      IDLE seconds (from /proc: user+system time), and its resident memory (now and its
#      high-water mark);
#   3. a provisioning decision on that cluster: the Deployment grows by 100 pods, and the
#      provisioner's "solved" line gives the solve's duration;
#   4. a disruption pass on that cluster: a node of the pool is cordoned and uncordoned (a
#      change of the model), and the controller's "disruption pass" lines give each pass's
#      duration;
#   5. it deletes the Deployment and the NodePool (their nodes drain and go).
#
#   hack/idle-bench.sh [PODS] [IDLE]      (default 10000 pods, 120 s)
set -euo pipefail
cd "$(dirname "$0")/.."
export KUBECONFIG=${KUBECONFIG:-$PWD/.local/kubeconfig}
kubectl=bin/kubectl
pods=${1:-10000}
idle=${2:-120}
log=.local/logs/karpenter.log
pid=$(pgrep -f 'bin/karpenter --leader-elect' | head -1)
[[ -n "$pid" ]] || { echo "no manager running: start make run first" >&2; exit 1; }

pool() {
  $kubectl apply -f - >/dev/null <<YAML
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bench}
spec:
  weight: 100
  template:
    metadata: {labels: {pool: bench}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: ["c6g.2xlarge"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
  disruption: {consolidateAfter: $1}
YAML
}
deploy() {
  $kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench, namespace: default}
spec:
  replicas: $1
  selector: {matchLabels: {app: bench}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      terminationGracePeriodSeconds: 0
      nodeSelector: {karpenter.sh/nodepool: bench}
      containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 750m, memory: 1Gi}}}]
YAML
}
ready() { $kubectl get deployment bench -o jsonpath='{.status.readyReplicas}' 2>/dev/null || echo 0; }
# running counts the pods themselves: kube-controller-manager's ReplicaSet status can lag
# behind the pods for minutes on a cluster this size, so the Deployment's readyReplicas
# alone is not a reliable signal that the scale-out is done.
running() { $kubectl get pods -n default -l app=bench --field-selector=status.phase=Running --no-headers 2>/dev/null | wc -l; }
waitReady() {
  local want=$1 start=$SECONDS i=0
  while [[ "$(ready)" != "$want" ]]; do
    (( SECONDS - start < 1800 )) || { echo "timed out at $(ready) of $want ready" >&2; exit 1; }
    if (( ++i % 6 == 0 )) && (( $(running) >= want )); then return; fi
    sleep 5
  done
}
cpuTicks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

pool 30s
start=$SECONDS
for ((n = 1000; n <= pods; n += 1000)); do
  deploy "$n"
  waitReady "$n"
done
echo "scale-out: $pods pods Running in $((SECONDS - start)) s, in steps of 1000"
want=$((pods / 10))
settle=$SECONDS
while (( $($kubectl get nodes -l karpenter.sh/nodepool=bench --no-headers | wc -l) > want && SECONDS - settle < 900 )); do sleep 10; done
echo "settled: $($kubectl get nodes -l karpenter.sh/nodepool=bench --no-headers | wc -l) nodes ($want needed) $((SECONDS - start)) s after the start"
sleep 120

hz=$(getconf CLK_TCK)
mark=$(wc -l < "$log")
before=$(cpuTicks)
sleep "$idle"
after=$(cpuTicks)
passes=$(tail -n +"$((mark + 1))" "$log" | grep -c '"msg":"disruption pass"' || true)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
awk -v d="$((after - before))" -v hz="$hz" -v s="$idle" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  printf "idle for %d s: manager cpu %.2f%% of one core (%.2f s); RSS %.0f MiB, peak %.0f MiB\n", s, 100 * d / hz / s, d / hz, rss / 1024, hwm / 1024 }'
echo "  disruption passes in that window: $passes (an idle cluster is passed over every 5 minutes)"

mark=$(wc -l < "$log")
deploy "$((pods + 100))"
waitReady "$((pods + 100))"
echo "provisioning decision for 100 more pods on the cluster:"
tail -n +"$mark" "$log" | grep '"msg":"solved"' | sed 's/^/  /'

mark=$(wc -l < "$log")
node=$($kubectl get nodes -l karpenter.sh/nodepool=bench -o name | sed -n 1p)
$kubectl cordon "$node" >/dev/null
sleep 15
$kubectl uncordon "$node" >/dev/null
sleep 30
echo "disruption passes after a change of the model:"
tail -n +"$mark" "$log" | grep '"msg":"disruption pass"' | sed -n 1,5p | sed 's/^/  /'

$kubectl delete deployment bench --wait=false >/dev/null
$kubectl delete nodepool bench --wait=false >/dev/null

// Package disruption decides which nodes to remove or replace: empty nodes, nodes that drifted
// from their NodePool, expired nodes, and nodes whose pods fit elsewhere (consolidation), within
// the NodePools' disruption budgets, PodDisruptionBudgets and karpenter.sh/do-not-disrupt; and
// carries the decisions out.
//
// It decides purely: Cluster is a snapshot (nodes with their pods, the NodePools with their
// instance types, PodDisruptionBudgets, the time), each Method turns the snapshot's candidates
// into Commands by simulating with the provisioner's solver, Pass runs the methods in their
// order until one acts, and Validate re-checks a command on a fresh snapshot. None of that
// reads or writes the API server or sleeps, so it is table-tested and benchmarked without one,
// and karpenterctl simulate --disrupt runs it on manifests (docs/simulate.md). controller.go
// builds the snapshot from the caches and the cluster state on the leader every 10 seconds;
// queue.go is the only part that writes (taint, replacements, deletion, roll back).
// docs/disruption.md describes the semantics, which follow upstream Karpenter's
// pkg/controllers/disruption.
package disruption

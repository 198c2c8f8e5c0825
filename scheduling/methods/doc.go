// Package methods holds the disruption methods: it decides which nodes to remove or replace: empty nodes, nodes that drifted
// from their NodePool, expired nodes, and nodes whose pods fit elsewhere (consolidation),
// within the NodePools' disruption budgets, PodDisruptionBudgets, karpenter.sh/do-not-disrupt
// and the policy gate.
//
// It decides purely: Cluster is disruption's view of a snapshot (package snapshot: the nodes
// and in-flight NodeClaims with their pods, pending pods and the pods of deleting nodes, the
// NodePools with their instance types), each Method turns the candidates into Commands by
// simulating with the solver, Pass runs the methods in their order until one acts, and
// Validate re-checks a command on a fresh snapshot. None of that reads or writes the API
// server, keeps time or sleeps, so it is table-tested and benchmarked without one, and
// karpenterctl simulate --disrupt runs it on manifests (docs/simulate.md). It must not do
// I/O: controllers/disruption takes the snapshots and carries the commands out.
// docs/disruption.md describes the semantics, which follow upstream Karpenter's
// pkg/controllers/disruption.
package methods

// Package disruption decides which nodes to remove or replace: empty nodes, nodes that drifted
// from their NodePool, expired nodes, and nodes whose pods fit elsewhere (consolidation), within
// the NodePools' disruption budgets, PodDisruptionBudgets and karpenter.sh/do-not-disrupt.
//
// The package is pure where it decides: Cluster is a snapshot (nodes with their pods, the
// NodePools with their instance types, PodDisruptionBudgets, the time), each Method turns the
// snapshot's candidates into Commands by simulating with the provisioner's solver, and Pass
// runs the methods in their order until one acts. Nothing here reads or writes the API server
// or sleeps: the controller that taints, launches replacements and deletes candidates builds
// the snapshot from controllers/state and carries the commands out, and karpenterctl simulate
// --disrupt builds it from manifests (docs/simulate.md). The methods and their semantics follow
// upstream Karpenter's pkg/controllers/disruption; docs/disruption.md describes them.
package disruption

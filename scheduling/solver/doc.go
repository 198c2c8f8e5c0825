// Package solver decides placements: given pending pods, existing and in-flight nodes,
// NodePools and their instance types, it decides which pods go where and which new NodeClaims
// to launch, cheapest first. It is a pure package: plain inputs in, a decision out, no
// Kubernetes client, no clock, no randomness; the same input gives the same decision. The
// provisioner calls it once per batch (through the planner when policies apply), disruption
// (scheduling/methods) for every move it weighs, karpenterctl on manifests; all of them
// build its input from one snapshot (scheduling/snapshot).
//
// Where to look first:
//
//   - solver.go: the input and result types, Solve, and prepare (NodePools, instance types
//     and existing nodes turned into the solver's own structures).
//   - place.go: the order pods are placed in, and the relaxation of their preferences.
//   - existingnode.go: placing a pod on a node that exists or is in flight.
//   - nodeclaim.go: growing a new NodeClaim, one named step at a time (fit, policy,
//     requirements, type filter, growth, minValues) and committing the plan.
//   - instancetype.go: the solve's instance types, their compatibility with requirements, and
//     their cheapest offering.
//   - constraints.go: the policy hook and the offering filters it brings.
//   - pack.go: filling NodeClaims for a target type when a batch has many similar pods.
//   - topology.go: topology spread, pod affinity and anti-affinity.
//   - cost.go: the price of a decision and its fractional lower bound.
//   - daemonsets.go: the DaemonSet overhead a NodePool's nodes carry.
//   - apiobject.go: the NodeClaim object of a decision (NodeClaimFor).
//
// Requirements, resource arithmetic, Node, tolerations and the cheapest offering come from
// package scheduling, the vocabulary this package shares with the snapshot, the planner,
// disruption and the providers (docs/architecture.md).
package solver

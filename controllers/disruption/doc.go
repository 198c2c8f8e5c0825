// Package disruption carries out what the pure disruption methods (scheduling/methods)
// decide. The controller runs a pass on the leader when the cluster model has changed, or
// when time alone can change a decision (consolidateAfter, expireAfter, a budget's schedule),
// and hands each command to the orchestration queue, which tracks it to its end as a
// reconciler over the objects: candidates tainted karpenter.sh/disrupted with their NodeClaims'
// DisruptionReason condition, replacements labelled with the command, launched and initialized,
// then the candidates deleted (their termination drains them), or everything rolled back.
// Several commands run at once within the NodePools' budgets. Because every step is written on
// the objects, a restarted or newly elected manager adopts what is in flight, or rolls it back.
// It is the only part of disruption that writes.
package disruption

// Package eviction drains nodes for the controllers that do (node termination, the reboot of
// node repair): Plan decides, from a node's pods, the time and its deadline, which pods to
// evict next (upstream Karpenter's tiers) and which must be deleted to be gone by the deadline;
// Queue evicts them through the Eviction API with a per-pod backoff, respecting
// PodDisruptionBudgets and karpenter.sh/do-not-disrupt, and deletes those past their deadline.
// It writes pods only (evictions, deletions) and never decides that a node is to be drained
// (docs/architecture.md, "Data flow": termination).
package eviction

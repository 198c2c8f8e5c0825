package eviction

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// Drain is what a drain does next on a node, decided from its pods, the time and the node's
// deadline (the NodeClaim's terminationGracePeriod run out; nil when it has none). It is pure:
// the controller hands Evict and Delete to the eviction queue.
type Drain struct {
	// Evict are the pods of the first tier that still has drainable pods not yet terminating,
	// to evict through the Eviction API (PodDisruptionBudgets and do-not-disrupt respected).
	Evict []*corev1.Pod
	// Delete are the drainable pods, of any tier, that must be deleted now to be gone by the
	// deadline: their own grace period would outlast it.
	Delete []*corev1.Pod
	// Waiting counts the drainable pods still on the node, terminating or not; the node is
	// drained when it is zero.
	Waiting int
}

// Tiers of eviction, in upstream Karpenter's order (that of the kubelet's graceful node
// shutdown): a tier is evicted once every earlier one has gone.
const (
	tierNonCritical = iota
	tierNonCriticalDaemonSet
	tierCritical
	tierCriticalDaemonSet
	tiers
)

// Tier is the eviction tier of a pod.
func Tier(p *corev1.Pod) int {
	t := tierNonCritical
	if scheduling.IsCritical(p) {
		t = tierCritical
	}
	if scheduling.IsOwnedByDaemonSet(p) {
		t++
	}
	return t
}

// Plan decides the next step of draining a node with these pods. Only drainable pods
// count (scheduling.IsDrainable: not mirror pods, not pods that tolerate the disrupted taint,
// not pods terminating past their grace period). Pods already terminating are waited for and
// not evicted again. Tiers go in order, but a pod that must be deleted for the deadline is
// deleted whatever its tier: at the deadline, a PodDisruptionBudget on an earlier tier must
// not hold a later one past it.
func Plan(pods []*corev1.Pod, now time.Time, deadline *time.Time) Drain {
	var d Drain
	// byTier holds the drainable pods not to be deleted, terminating or not: a tier waits
	// for the earlier ones to be gone, not merely terminating, since pods of a later tier
	// (DaemonSets: logging, networking) serve the earlier ones while they stop.
	var byTier [tiers][]*corev1.Pod
	for _, p := range pods {
		if !scheduling.IsDrainable(p, now) {
			continue
		}
		d.Waiting++
		if MustDelete(p, now, deadline) {
			d.Delete = append(d.Delete, p)
			continue
		}
		byTier[Tier(p)] = append(byTier[Tier(p)], p)
	}
	for _, group := range byTier {
		if len(group) == 0 {
			continue
		}
		for _, p := range group {
			if !scheduling.IsTerminating(p) {
				d.Evict = append(d.Evict, p)
			}
		}
		break
	}
	return d
}

// MustDelete reports whether a drainable pod must be deleted, not evicted, to be gone by the
// deadline: the deadline is near enough that its own terminationGracePeriodSeconds would
// outlast it (or has passed), or it is terminating with a grace that ends after the deadline.
// Without a deadline, no pod must.
func MustDelete(p *corev1.Pod, now time.Time, deadline *time.Time) bool {
	if deadline == nil {
		return false
	}
	if scheduling.IsTerminating(p) {
		return p.DeletionTimestamp.After(*deadline)
	}
	return !now.Before(DeleteAt(p, *deadline))
}

// DeleteAt is when a pod must be deleted to finish by the deadline: the deadline less its
// terminationGracePeriodSeconds (the API's default, 30 s, when it states none).
func DeleteAt(p *corev1.Pod, deadline time.Time) time.Time {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	return deadline.Add(-time.Duration(grace) * time.Second)
}

// DeleteGrace is the grace period a pod deleted for the deadline gets: what is left until the
// deadline, at least a second (zero would remove it from etcd before its containers stop,
// breaking the one-pod-at-a-time promise of StatefulSets), at most its own.
func DeleteGrace(p *corev1.Pod, now, deadline time.Time) int64 {
	left := int64(deadline.Sub(now) / time.Second)
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		own = *p.Spec.TerminationGracePeriodSeconds
	}
	return max(1, min(left, own))
}

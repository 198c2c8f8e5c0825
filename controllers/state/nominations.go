package state

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Nominations are the cluster model's nominations: the provisioner's and disruption's
// placements of pending pods onto nodes and in-flight NodeClaims, and kube-scheduler's
// rejections of them (docs/architecture.md, "Data flow"). They share the model's lock.
type Nominations struct{ c *Cluster }

// Nominations is the model's nominations.
func (c *Cluster) Nominations() Nominations { return Nominations{c} }

// DisplacedGrace is how long a displaced pod waits after its node became Ready.
func (nm Nominations) DisplacedGrace() time.Duration { return nm.c.displacedGrace }

// Nominate records that a pod should run on a node, or on a NodeClaim being launched.
func (nm Nominations) Nominate(pod *corev1.Pod, target string) {
	c := nm.c
	c.mu.Lock()
	c.nominations[pod.UID] = nomination{target: target, at: c.clock.Now()}
	delete(c.rejected, pod.UID)
	c.mu.Unlock()
	c.changed()
}

// Nominated reports whether the pod has a nomination not yet forgotten.
func (nm Nominations) Nominated(pod *corev1.Pod) bool {
	c := nm.c
	_, _, ok := c.Nominations().NominatedTo(pod)
	return ok
}

// NominatedTo returns where a pod is nominated and since when; nominations older than
// LaunchNominationTTL are forgotten.
func (nm Nominations) NominatedTo(pod *corev1.Pod) (string, time.Time, bool) {
	c := nm.c
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nominations[pod.UID]
	if !ok {
		return "", time.Time{}, false
	}
	if c.clock.Since(n.at) > LaunchNominationTTL {
		delete(c.nominations, pod.UID)
		delete(c.rejected, pod.UID)
		return "", time.Time{}, false
	}
	return n.target, n.at, true
}

// Rejected records that kube-scheduler has just marked a nominated pod unschedulable again. Once
// the pod's node has been schedulable (its NodeClaim initialized) for RejectionSettle before
// that, kube-scheduler tried the pod there and refused it: for want of room, or for a
// constraint (topology spread, anti-affinity) that the pods it bound off-plan now break. The
// pod is then displaced, as when its node has no room left, and does not wait out
// ExistingNominationTTL. Pods kube-scheduler has not marked unschedulable are not recorded.
func (nm Nominations) Rejected(pod *corev1.Pod) {
	c := nm.c
	marked := slices.ContainsFunc(pod.Status.Conditions, func(cond corev1.PodCondition) bool {
		return cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nominations[pod.UID]; ok && marked {
		c.rejected[pod.UID] = c.clock.Now()
	}
}

// RejectedSince reports whether kube-scheduler refused the pod after since plus
// RejectionSettle.
func (nm Nominations) RejectedSince(pod *corev1.Pod, since time.Time) bool {
	c := nm.c
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.rejected[pod.UID]
	return ok && !since.IsZero() && at.After(since.Add(RejectionSettle))
}

// NominationOf is the node or NodeClaim the pod is nominated to, if its nomination holds.
// Nominations of pods that have since bound are forgotten only at the provisioner's next
// snapshot, so callers ask for pending pods only.
func (nm Nominations) NominationOf(pod *corev1.Pod) (string, bool) {
	c := nm.c
	target, _, ok := c.Nominations().NominatedTo(pod)
	return target, ok
}

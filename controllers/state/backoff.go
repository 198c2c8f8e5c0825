package state

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Launch backoff bounds a loop the provisioner cannot see through: it launches a node for a
// pod, the pod does not fit there beside what kube-scheduler puts first (DaemonSet pods
// counted short, a higher-priority pod), it is pending again and another node is launched
// for it, and so on. A pod displaced from a node that could never hold it
// (snapshot.Misfit), or a pod of a workload kube-scheduler preempted from a node launched
// lately, waits before capacity is launched for it again: MisfitBackoff, doubling with each
// node it misfits on, reset after MisfitReset without one (docs/scheduling.md, "Bounded
// relaunches").
const (
	MisfitBackoff    = 30 * time.Second
	MaxMisfitBackoff = 10 * time.Minute
	MisfitReset      = 30 * time.Minute
)

type misfit struct {
	node         string
	count        int
	until, since time.Time
}

type preemption struct {
	node string
	at   time.Time
}

// WorkloadKey names what a pod is one of: its controller (a replacement pod has a new UID),
// or the pod itself.
func WorkloadKey(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.UID != "" {
		return string(ref.UID)
	}
	return string(p.UID)
}

// Misfit records that the pod does not fit on the node, launched for it. It returns until
// when the provisioner must not launch for the pod's workload, and whether this is news (a
// node it had not misfit on yet: the caller says so in an event).
func (c *Cluster) Misfit(p *corev1.Pod, node string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, now := WorkloadKey(p), c.clock.Now()
	c.forgetOldMisfits(now)
	m := c.misfits[key]
	if m != nil && m.node == node {
		return m.until, false
	}
	count := 1
	if m != nil && now.Sub(m.since) < MisfitReset {
		count = m.count + 1
	}
	delay := MisfitBackoff << min(count-1, 10)
	delay = min(delay, MaxMisfitBackoff)
	c.misfits[key] = &misfit{node: node, count: count, until: now.Add(delay), since: now}
	return now.Add(delay), true
}

// BackedOff reports until when the provisioner must not launch for the pod's workload.
func (c *Cluster) BackedOff(p *corev1.Pod) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.misfits[WorkloadKey(p)]
	if m == nil || !c.clock.Now().Before(m.until) {
		return time.Time{}, false
	}
	return m.until, true
}

// PreemptedFrom is the node kube-scheduler last preempted a pod of p's workload from, if it
// did so within MisfitBackoff's reach (MaxMisfitBackoff).
func (c *Cluster) PreemptedFrom(p *corev1.Pod) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr, ok := c.preempted[WorkloadKey(p)]
	if !ok || c.clock.Since(pr.at) > MaxMisfitBackoff {
		return "", false
	}
	return pr.node, true
}

// notePreemption records a pod kube-scheduler marked for preemption (the model's pod handler
// calls it, with the model's lock held), and forgets records past their reach.
func (c *Cluster) notePreemption(p *corev1.Pod) {
	if p.Spec.NodeName == "" || !slices.ContainsFunc(p.Status.Conditions, func(cond corev1.PodCondition) bool {
		return cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue && cond.Reason == corev1.PodReasonPreemptionByScheduler
	}) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.forgetOldMisfits(now)
	c.preempted[WorkloadKey(p)] = preemption{node: p.Spec.NodeName, at: now}
}

// forgetOldMisfits drops the records past their reach, so that the maps do not grow with
// workloads long gone (called with c.mu held).
func (c *Cluster) forgetOldMisfits(now time.Time) {
	for k, pr := range c.preempted {
		if now.Sub(pr.at) > MaxMisfitBackoff {
			delete(c.preempted, k)
		}
	}
	for k, m := range c.misfits {
		if now.Sub(m.since) > MisfitReset {
			delete(c.misfits, k)
		}
	}
}

package scheduling

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// The pod predicates every part shares (the provisioner, disruption, the drain, the static
// NodePools, karpenterctl simulate): one definition each, so that what the provisioner places,
// what disruption reschedules and what the drain waits for agree.

// IsTerminal reports whether the pod has finished (Succeeded or Failed).
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IsTerminating reports whether the pod is being deleted.
func IsTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// IsOwnedByDaemonSet reports whether a DaemonSet controls the pod (it runs on every node that
// admits it, and goes with the node).
func IsOwnedByDaemonSet(p *corev1.Pod) bool { return ownedBy(p, "DaemonSet") }

// IsMirror reports whether the pod is a static pod's mirror: the kubelet owns it, the API
// server cannot evict it, and it goes with the node.
func IsMirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return ownedBy(p, "Node")
}

// IsNodeBound reports whether the pod belongs to its node rather than to the workload
// running on it: a DaemonSet's pod or a mirror pod. Such pods are not rescheduled elsewhere
// when their node goes, and each node carries its own.
func IsNodeBound(p *corev1.Pod) bool { return IsOwnedByDaemonSet(p) || IsMirror(p) }

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind && o.Controller != nil && *o.Controller {
			return true
		}
	}
	// An owner reference without the controller flag still names who made the pod (objects
	// written by hand or by older controllers).
	for _, o := range p.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// IsReschedulable reports whether the pod must find another node if its node goes: it is
// neither finished nor terminating, not a DaemonSet's or a mirror pod, and does not tolerate
// karpenter.sh/disrupted:NoSchedule (the drain leaves such a pod on its node, as upstream's
// IsReschedulable leaves it out).
func IsReschedulable(p *corev1.Pod) bool {
	return !IsTerminal(p) && !IsTerminating(p) && !IsNodeBound(p) && !ToleratesDisrupted(p)
}

// IsCritical reports whether the pod runs at a system-critical priority class; the drain
// evicts such pods after the others, as the kubelet's graceful node shutdown does.
func IsCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// ToleratesDisrupted reports whether the pod tolerates karpenter.sh/disrupted:NoSchedule: it
// would be scheduled straight back onto a draining node (a DaemonSet that tolerates every
// taint), so the drain neither evicts it nor waits for it.
func ToleratesDisrupted(p *corev1.Pod) bool {
	return ToleratesTaint(p, &karpv1.DisruptedNoScheduleTaint)
}

// DoNotDisrupt reports whether the pod's karpenter.sh/do-not-disrupt annotation holds at now,
// and until when: "true" holds for as long as it is set (a zero time); a duration ("1h") holds
// for that long from the pod's start (status.startTime; its creation while it has not
// started), as upstream Karpenter counts it. Any other value does not hold.
func DoNotDisrupt(p *corev1.Pod, now time.Time) (bool, time.Time) {
	v, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		return false, time.Time{}
	}
	if v == "true" {
		return true, time.Time{}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false, time.Time{}
	}
	start := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		start = p.Status.StartTime.Time
	}
	until := start.Add(d)
	return now.Before(until), until
}

// IsStuckTerminating reports whether the pod has been terminating longer than its grace
// period: its deletionTimestamp (the deletion request plus the grace period) has passed, so
// whatever holds it (a finalizer, a kubelet that is gone) is not the pod shutting down.
func IsStuckTerminating(p *corev1.Pod, now time.Time) bool {
	return IsTerminating(p) && now.After(p.DeletionTimestamp.Time)
}

// IsDrainable reports whether a drain evicts the pod or waits for it to go: it has not
// finished, it is not a mirror pod, it does not tolerate the disrupted taint, and it is not
// stuck terminating past its grace period (docs/architecture.md, "Data flow": termination).
func IsDrainable(p *corev1.Pod, now time.Time) bool {
	return !IsTerminal(p) && !IsMirror(p) && !ToleratesDisrupted(p) && !IsStuckTerminating(p, now)
}

// IsProvisionable reports whether the provisioner should find a node for a pod: pending, not
// bound, not owned by a DaemonSet, not terminating, and either held by the CapacityBudget
// gate alone, or marked unschedulable by its scheduler, or not yet looked at by
// kube-scheduler (no PodScheduled condition: not gated, not nominated by a preemption, for the
// default scheduler). The second kind matters in a
// scale-out: kube-scheduler marks new pods unschedulable at about a hundred a second, and
// waiting for its verdict on a thousand kept the batch open ten seconds. The solver places
// such pods on existing nodes with room first, as kube-scheduler would, so they launch
// capacity only where there is none.
func IsProvisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if IsOwnedByDaemonSet(p) {
		return false
	}
	if len(p.Spec.SchedulingGates) > 0 {
		// Only the CapacityBudget gate is the provisioner's to lift; a pod held by any other
		// gate waits for its owner whatever the provisioner does.
		return IsBudgetGated(p) && p.Status.NominatedNodeName == "" &&
			(p.Spec.SchedulerName == "" || p.Spec.SchedulerName == corev1.DefaultSchedulerName)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			// SchedulingGated with no gate left: the gate was just lifted and kube-scheduler
			// has not looked at the pod since; it is pending all the same, and its nomination
			// must hold.
			return cond.Status == corev1.ConditionFalse &&
				(cond.Reason == corev1.PodReasonUnschedulable || cond.Reason == corev1.PodReasonSchedulingGated)
		}
	}
	return p.Status.NominatedNodeName == "" &&
		(p.Spec.SchedulerName == "" || p.Spec.SchedulerName == corev1.DefaultSchedulerName)
}

// IsBudgetGated reports whether the pod's only scheduling gate is the CapacityBudget gate
// (docs/architecture.md, "CapacityBudget gate"): kube-scheduler leaves it alone until the
// provisioner has placed it within its namespace's budget.
func IsBudgetGated(p *corev1.Pod) bool {
	return len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == policyv1.CapacityBudgetGate
}

// ClaimName is the PersistentVolumeClaim a pod volume uses, if any: its own, or the one a
// generic ephemeral volume gets (<pod>-<volume>).
func ClaimName(p *corev1.Pod, vol *corev1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		return p.Name + "-" + vol.Name
	}
	return ""
}

package scheduling

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// NodeReady reports whether the node's Ready condition is True, and since when. A node that
// reports no Ready condition is not Ready (karpenterctl gives the nodes of manifests a Ready
// condition when they state none).
func NodeReady(n *corev1.Node) (bool, time.Time) {
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// NodeChanged reports whether a node's update can change a decision. A heartbeat (the
// conditions' timestamps, a kubelet refreshing its status every few minutes on every node)
// cannot: only what the node is labelled, tainted and annotated with, what it can allocate,
// whether it is Ready, schedulable or being deleted. (Since when it is Ready matters to
// nominations alone, which the provisioner reads in every snapshot it takes.) The cluster
// model moves its revision on such changes only, and controllers that watch Nodes filter
// their updates with it.
func NodeChanged(a, b *corev1.Node) bool {
	readyA, _ := NodeReady(a)
	readyB, _ := NodeReady(b)
	return readyA != readyB || a.Spec.Unschedulable != b.Spec.Unschedulable || a.Spec.ProviderID != b.Spec.ProviderID ||
		!equality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) || !equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Annotations, b.Annotations) || !equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) || !equality.Semantic.DeepEqual(a.Finalizers, b.Finalizers) ||
		conditionsChanged(a.Status.Conditions, b.Status.Conditions)
}

// conditionsChanged reports whether a condition came, went or changed its status (what node
// repair reads); a heartbeat changes none.
func conditionsChanged(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return true
	}
	status := make(map[corev1.NodeConditionType]corev1.ConditionStatus, len(a))
	for _, c := range a {
		status[c.Type] = c.Status
	}
	for _, c := range b {
		if s, ok := status[c.Type]; !ok || s != c.Status {
			return true
		}
	}
	return false
}

package scheduling

import (
	"time"

	corev1 "k8s.io/api/core/v1"
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

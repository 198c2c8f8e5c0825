package scheduling

import corev1 "k8s.io/api/core/v1"

// Node is an existing node or an in-flight NodeClaim, as scheduling sees it: what it is
// labelled and tainted with, what it can allocate, and the pods bound or nominated to it.
type Node struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	// Pods are bound or nominated to it; their requests are used.
	Pods []*corev1.Pod
	// InFlight marks a NodeClaim whose node has not registered yet.
	InFlight bool
	// PricePerHour is what the node costs, when known (a NodeClaim not launched yet has no
	// instance-type label to price it by); the policy engine's cost attribution uses it.
	PricePerHour float64
}

package scheduling

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

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
	// VolumeLimits, where the node's CSINode states them, cap how many volumes of each CSI
	// driver it attaches; a driver it does not name, or a node without one, has no cap known.
	VolumeLimits map[string]int
}

// Volumes are the volumes a pod attaches to its node, by CSI driver: each a claim's
// namespace/name, so that pods sharing a claim count it once.
type Volumes map[string][]string

// Attachments count the volumes attached to a node, by driver, against its limits.
type Attachments struct {
	limits map[string]int
	used   map[string]map[string]bool
}

// NewAttachments starts counting for a node with these limits (nil: none known).
func NewAttachments(limits map[string]int) *Attachments {
	return &Attachments{limits: limits, used: map[string]map[string]bool{}}
}

// Fits reports whether the volumes can attach too, and names the driver whose limit they
// would exceed.
func (a *Attachments) Fits(v Volumes) (bool, string) {
	if len(a.limits) == 0 {
		return true, ""
	}
	for driver, claims := range v {
		limit, ok := a.limits[driver]
		if !ok {
			continue
		}
		n, seen := len(a.used[driver]), map[string]bool{}
		for _, c := range claims {
			if !a.used[driver][c] && !seen[c] {
				seen[c] = true
				n++
			}
		}
		if n > limit {
			return false, driver
		}
	}
	return true, ""
}

// Add counts the volumes as attached.
func (a *Attachments) Add(v Volumes) {
	for driver, claims := range v {
		if a.used[driver] == nil {
			a.used[driver] = map[string]bool{}
		}
		for _, c := range claims {
			a.used[driver][c] = true
		}
	}
}

// Clone is an independent copy: what is added to it is not added to a.
func (a *Attachments) Clone() *Attachments {
	out := &Attachments{limits: a.limits, used: make(map[string]map[string]bool, len(a.used))}
	for driver, claims := range a.used {
		out.used[driver] = maps.Clone(claims)
	}
	return out
}

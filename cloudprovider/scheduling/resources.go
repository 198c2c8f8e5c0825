package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests are what a pod needs on a node: its containers' requests, or its largest init
// container's if that is more, plus sidecars and pod overhead, and one of the node's pods.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		AddResources(total, c.Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			AddResources(sidecars, c.Resources.Requests)
			continue
		}
		// A plain init container runs alone, with the sidecars started before it.
		need := sidecars.DeepCopy()
		AddResources(need, c.Resources.Requests)
		maxInto(total, need)
	}
	AddResources(total, sidecars)
	AddResources(total, p.Spec.Overhead)
	total[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return total
}

// AddResources adds src into dst.
func AddResources(dst, src corev1.ResourceList) {
	for k, v := range src {
		q := dst[k]
		q.Add(v)
		dst[k] = q
	}
}

func maxInto(dst, src corev1.ResourceList) {
	for k, v := range src {
		if q, ok := dst[k]; !ok || v.Cmp(q) > 0 {
			dst[k] = v.DeepCopy()
		}
	}
}

// Fits reports whether requests fit in available, and names the first resource that does not.
func Fits(requests, available corev1.ResourceList) (bool, corev1.ResourceName) {
	for k, v := range requests {
		if v.IsZero() {
			continue
		}
		a, ok := available[k]
		if !ok || v.Cmp(a) > 0 {
			return false, k
		}
	}
	return true, ""
}

// Subtract returns a - b; a may be nil (a node that has not reported its allocatable yet).
func Subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for k, v := range b {
		q := out[k]
		q.Sub(v)
		out[k] = q
	}
	return out
}

// PodRequestCache computes each pod's requests once: a snapshot of the cluster fills it, and
// the solver, the policy planner and disruption read the same lists instead of summing
// containers again. The lists it returns are shared and must not be modified. It is not safe
// for concurrent use; a nil cache computes every time.
type PodRequestCache struct {
	m map[*corev1.Pod]corev1.ResourceList
}

// NewPodRequestCache returns an empty cache.
func NewPodRequestCache() *PodRequestCache {
	return &PodRequestCache{m: map[*corev1.Pod]corev1.ResourceList{}}
}

// Of is the pod's requests (PodRequests), computed on first use.
func (c *PodRequestCache) Of(p *corev1.Pod) corev1.ResourceList {
	if c == nil {
		return PodRequests(p)
	}
	r, ok := c.m[p]
	if !ok {
		r = PodRequests(p)
		c.m[p] = r
	}
	return r
}

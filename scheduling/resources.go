package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests are what a pod needs on a node, as kube-scheduler counts it: its containers'
// requests, or its largest init container's if that is more, plus sidecars (or the pod-level
// requests where set), pod overhead, and one of the node's pods. The pod is taken as admitted:
// a template's limits-only containers or LimitRange defaults are Admission's to add.
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
	// Pod-level resources, where set, stand for the containers' sum of what they name (cpu,
	// memory, hugepages), as kube-scheduler counts them.
	if pr := p.Spec.Resources; pr != nil {
		for k, v := range pr.Requests {
			total[k] = v.DeepCopy()
		}
	}
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
// the solver, the policy planner and disruption read the same lists (and the same cpu and
// memory figures) instead of summing containers again. The lists it returns are shared and
// must not be modified. It is not safe for concurrent use; a nil cache computes every time.
type PodRequestCache struct {
	m map[*corev1.Pod]*podRequests
}

type podRequests struct {
	list          corev1.ResourceList
	cpu, mem, gpu float64
}

// NewPodRequestCache returns an empty cache.
func NewPodRequestCache() *PodRequestCache {
	return &PodRequestCache{m: map[*corev1.Pod]*podRequests{}}
}

func (c *PodRequestCache) entry(p *corev1.Pod) *podRequests {
	if c != nil {
		if e, ok := c.m[p]; ok {
			return e
		}
	}
	l := PodRequests(p)
	e := &podRequests{list: l, cpu: float64(l.Cpu().MilliValue()) / 1000, mem: float64(l.Memory().Value()), gpu: Accelerators(l)}
	if c != nil {
		c.m[p] = e
	}
	return e
}

// Of is the pod's requests (PodRequests), computed on first use.
func (c *PodRequestCache) Of(p *corev1.Pod) corev1.ResourceList { return c.entry(p).list }

// CPUAndMemory are the pod's cpu (vCPU) and memory (bytes) requests, computed on first use.
func (c *PodRequestCache) CPUAndMemory(p *corev1.Pod) (cpu, mem float64) {
	e := c.entry(p)
	return e.cpu, e.mem
}

// Amounts are the pod's cpu (vCPU), memory (bytes) and accelerator requests, as cost
// attribution reads them, computed on first use.
func (c *PodRequestCache) Amounts(p *corev1.Pod) (cpu, mem, gpu float64) {
	e := c.entry(p)
	return e.cpu, e.mem, e.gpu
}

// AcceleratorResources are the extended resources cost attribution counts as accelerators
// (docs/architecture.md, "Cost attribution"): NVIDIA and AMD GPUs and AWS Neuron devices.
var AcceleratorResources = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron"}

// Accelerators is how many accelerators a resource list holds.
func Accelerators(l corev1.ResourceList) float64 {
	n := 0.0
	for _, name := range AcceleratorResources {
		if q, ok := l[name]; ok {
			n += float64(q.Value())
		}
	}
	return n
}

// AmountsOf are a resource list's vCPU, bytes of memory and accelerators.
func AmountsOf(l corev1.ResourceList) (cpu, mem, gpu float64) {
	return float64(l.Cpu().MilliValue()) / 1000, float64(l.Memory().Value()), Accelerators(l)
}

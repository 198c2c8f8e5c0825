package scheduling

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admission is what the API server adds to a pod's requests when it admits the pod: the
// LimitRanges of the pod's namespace and the RuntimeClasses (docs/scheduling.md, "Requests as
// the API server admits them"). A pod template (a DaemonSet's, a Deployment's read from a
// manifest) is not a pod: none of it has been applied to it yet.
type Admission struct {
	LimitRanges    []*corev1.LimitRange
	RuntimeClasses []*nodev1.RuntimeClass
}

// Admit returns a copy of the pod with its requests as the API server would admit it:
//
//   - where a container (or init container, or the pod-level resources) sets a limit and no
//     request, the request is the limit (the Pod defaulting of the core/v1 API);
//   - where a container still has no request or limit for a resource, the namespace's
//     LimitRanges of type Container fill in defaultRequest and default (the LimitRanger
//     admission plugin; the first LimitRange in name order that sets one wins, and a
//     LimitRange read from a manifest gets the defaulting the API server gives it: default
//     from max, defaultRequest from default, then from min);
//   - a pod with a runtimeClassName gets the RuntimeClass's fixed overhead (the RuntimeClass
//     admission plugin), unless it sets its own.
//
// What mutating webhooks would add is not known here; a DaemonSet's own pods, when it has
// some, tell it (see DaemonSetRequests).
func (a Admission) Admit(p *corev1.Pod) *corev1.Pod {
	out := p.DeepCopy()
	ranges := a.containerRanges(out.Namespace)
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests = withDefaults(r.Requests, r.Limits)
			for _, lr := range ranges {
				for name, q := range lr.Default {
					if _, ok := r.Limits[name]; !ok {
						r.Limits = withDefaults(r.Limits, corev1.ResourceList{name: q})
					}
				}
				for name, q := range lr.DefaultRequest {
					if _, ok := r.Requests[name]; !ok {
						r.Requests = withDefaults(r.Requests, corev1.ResourceList{name: q})
					}
				}
			}
		}
	}
	if pr := out.Spec.Resources; pr != nil {
		pr.Requests = withDefaults(pr.Requests, pr.Limits)
	}
	if name := out.Spec.RuntimeClassName; name != nil && out.Spec.Overhead == nil {
		for _, rc := range a.RuntimeClasses {
			if rc.Name == *name && rc.Overhead != nil && len(rc.Overhead.PodFixed) > 0 {
				out.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
			}
		}
	}
	return out
}

// withDefaults adds to dst each resource of src it does not have, and returns it (allocated
// when nil and something is added).
func withDefaults(dst, src corev1.ResourceList) corev1.ResourceList {
	for name, q := range src {
		if _, ok := dst[name]; ok {
			continue
		}
		if dst == nil {
			dst = corev1.ResourceList{}
		}
		dst[name] = q.DeepCopy()
	}
	return dst
}

// containerRanges are the namespace's LimitRange items of type Container, in LimitRange name
// order, each with the API server's defaulting applied.
func (a Admission) containerRanges(namespace string) []corev1.LimitRangeItem {
	if namespace == "" {
		namespace = corev1.NamespaceDefault
	}
	var lrs []*corev1.LimitRange
	for _, lr := range a.LimitRanges {
		ns := lr.Namespace
		if ns == "" {
			ns = corev1.NamespaceDefault
		}
		if ns == namespace {
			lrs = append(lrs, lr)
		}
	}
	slices.SortFunc(lrs, func(x, y *corev1.LimitRange) int {
		switch {
		case x.Name < y.Name:
			return -1
		case x.Name > y.Name:
			return 1
		}
		return 0
	})
	var out []corev1.LimitRangeItem
	for _, lr := range lrs {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			item = *item.DeepCopy()
			item.Default = withDefaults(item.Default, item.Max)
			item.DefaultRequest = withDefaults(item.DefaultRequest, item.Default)
			item.DefaultRequest = withDefaults(item.DefaultRequest, item.Min)
			out = append(out, item)
		}
	}
	return out
}

// DaemonSetPod is a DaemonSet's pod as it would run on a new node: the template (what decides
// where it runs: tolerations, node selector, affinity) and what it requests there.
type DaemonSetPod struct {
	Pod      *corev1.Pod
	Requests corev1.ResourceList
}

// DaemonSetRequests is what a DaemonSet's pod requests on a node: its template as the API
// server would admit it, or what its newest pod requests if that is more (a mutating webhook
// or a RuntimeClass this process did not see added it), resource by resource. newest may be
// nil (no pod yet).
func DaemonSetRequests(template corev1.PodTemplateSpec, namespace string, newest *corev1.Pod, a Admission) DaemonSetPod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: template.Labels, Annotations: template.Annotations}, Spec: template.Spec}
	admitted := a.Admit(p)
	req := PodRequests(admitted)
	if newest != nil {
		maxInto(req, PodRequests(newest))
	}
	return DaemonSetPod{Pod: admitted, Requests: req}
}

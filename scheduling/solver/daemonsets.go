package solver

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// DaemonSetOverhead sums what the DaemonSets (given by their pod templates) that would run on
// a NodePool's nodes request there: those that tolerate its taints and whose node selector its
// requirements and labels allow. Keys the NodePool does not constrain may take any value.
func DaemonSetOverhead(np *karpv1.NodePool, templates []corev1.PodTemplateSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	reqs := scheduling.NewRequirements(np.Spec.Template.Spec.Requirements...)
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
next:
	for i := range templates {
		p := &corev1.Pod{Spec: templates[i].Spec}
		if !scheduling.Tolerates(p, np.Spec.Template.Spec.Taints, false) {
			continue
		}
		for k, v := range p.Spec.NodeSelector {
			if nr, ok := reqs[k]; ok && !nr.Has(v) {
				continue next
			}
		}
		for k, v := range scheduling.PodRequests(p) {
			if k == corev1.ResourcePods {
				continue
			}
			q := total[k]
			q.Add(v)
			total[k] = q
		}
	}
	return total
}

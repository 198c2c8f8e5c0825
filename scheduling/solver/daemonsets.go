package solver

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// DaemonSetOverhead sums what the DaemonSets' pods (with their requests as admitted, see
// scheduling.DaemonSetRequests) would request on a NodePool's nodes: those that tolerate its
// taints, whose node selector its requirements and labels allow, and whose required node
// affinity the NodePool does not rule out. Keys the NodePool does not constrain may take any
// value, so a DaemonSet that might run there is counted.
func DaemonSetOverhead(np *karpv1.NodePool, daemonSets []scheduling.DaemonSetPod) corev1.ResourceList {
	total := corev1.ResourceList{}
	reqs := scheduling.NewRequirements(np.Spec.Template.Spec.Requirements...)
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
next:
	for _, ds := range daemonSets {
		p := ds.Pod
		if !scheduling.Tolerates(p, np.Spec.Template.Spec.Taints, false) {
			continue
		}
		for k, v := range p.Spec.NodeSelector {
			if nr, ok := reqs[k]; ok && !nr.Has(v) {
				continue next
			}
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			possible := len(terms) == 0
			for i := range terms {
				if !reqs.RulesOut(podRequirements(p, i, nil)) {
					possible = true
					break
				}
			}
			if !possible {
				continue
			}
		}
		for k, v := range ds.Requests {
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

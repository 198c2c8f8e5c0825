package snapshot

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// Misfit is a pending pod that its node cannot hold beside the pods that come before it
// there: the node's DaemonSet and mirror pods, and pods of higher priority. A node launched
// for such a pod was too small for it (what its DaemonSets request was counted short, or a
// higher-priority pod took the room), and another launched the same way would be too; the
// provisioner backs off before launching for it again (controllers/state.Cluster.Misfit).
type Misfit struct {
	Pod  *corev1.Pod
	Node string
}

// misfits reports whether the pod does not fit on the node beside the pods bound there that
// kube-scheduler gives precedence: node-bound pods and pods of higher priority.
func (s *Snapshot) misfits(p *corev1.Pod, node *corev1.Node, bound []*corev1.Pod) bool {
	if len(node.Status.Allocatable) == 0 {
		return false
	}
	free := node.Status.Allocatable
	prio := priority(p)
	for _, q := range bound {
		if scheduling.IsNodeBound(q) || priority(q) > prio {
			free = scheduling.Subtract(free, s.Requests.Of(q))
		}
	}
	ok, _ := scheduling.Fits(s.Requests.Of(p), free)
	return !ok
}

// RecentLaunch is how young a node's NodeClaim must be for a preemption from it to say the
// node was launched too small for the pod: older nodes are not the provisioner's doing.
const RecentLaunch = 10 * time.Minute

// Preempted tells whether a pod like p (of the workload of a pod kube-scheduler preempted
// from the node named) misfits there, the node being one Karpenter launched lately.
func (s *Snapshot) Preempted(p *corev1.Pod, nodeName string) bool {
	launched := false
	for _, nc := range s.Objects.NodeClaims {
		if nc.Status.NodeName == nodeName && s.Now.Sub(nc.CreationTimestamp.Time) <= RecentLaunch {
			launched = true
		}
	}
	if !launched {
		return false
	}
	for _, n := range s.Objects.Nodes {
		if n.Name != nodeName {
			continue
		}
		var bound []*corev1.Pod
		for _, q := range s.Objects.Pods {
			if q.Spec.NodeName == nodeName && !scheduling.IsTerminal(q) && q.DeletionTimestamp == nil {
				bound = append(bound, q)
			}
		}
		return s.misfits(p, n, bound)
	}
	return false
}

// priority is the pod's priority (0 when unset).
func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

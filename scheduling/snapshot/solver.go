package snapshot

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// SolverInput is the solver's input for the snapshot: its pending pods, the nodes and
// in-flight NodeClaims that offer room, and the NodePools that can launch, with the DaemonSet
// overhead each one's nodes would carry. The provisioner and karpenterctl simulate solve it.
func (s *Snapshot) SolverInput() *solver.Input {
	in := &solver.Input{Pods: s.Pods, Nodes: s.Nodes, Requests: s.Requests, VolumeRequirements: s.VolumeRequirements, PodVolumes: s.PodVolumes,
		NamespaceLabels: s.NamespaceLabels(), Catalog: solver.NewCatalog()}
	for _, np := range s.NodePools {
		// A static NodePool keeps its own size (controllers/static): its nodes take pods as
		// existing nodes, but nothing is launched for them.
		if np.NodePool.IsStatic() {
			continue
		}
		in.NodePools = append(in.NodePools, &solver.NodePool{NodePool: np.NodePool, InstanceTypes: np.InstanceTypes,
			DaemonSetOverhead: solver.DaemonSetOverhead(np.NodePool, s.DaemonSets), Usage: np.Usage})
	}
	return in
}

// NamespaceLabels are the snapshot's namespaces' labels, by name, for the solver
// (solver.Input.NamespaceLabels); nil when it has none (a karpenterctl workload without
// Namespace documents: not known).
func (s *Snapshot) NamespaceLabels() map[string]map[string]string {
	if s.Objects == nil || len(s.Objects.Namespaces) == 0 {
		return nil
	}
	out := make(map[string]map[string]string, len(s.Objects.Namespaces))
	for _, ns := range s.Objects.Namespaces {
		out[ns.Name] = ns.Labels
	}
	return out
}

// NodesWithBufferRoom are the snapshot's nodes with the CapacityBuffers' virtual pods where
// the solver puts them on the room that exists (copies of the nodes that take some; Nodes
// itself without buffers): a buffer's room is its namespace's, for the CapacityBudget
// attribution as for the provisioner's. Virtual pods with no room are left out: the next
// batch launches for them, and counts them then.
func (s *Snapshot) NodesWithBufferRoom() []*scheduling.Node {
	if s.Objects == nil || len(s.Objects.BufferPods) == 0 || len(s.Nodes) == 0 {
		return s.Nodes
	}
	res, err := solver.Solve(&solver.Input{Pods: s.Objects.BufferPods, Nodes: s.Nodes, Requests: s.Requests})
	if err != nil || len(res.Existing) == 0 {
		return s.Nodes
	}
	out := make([]*scheduling.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		if virtual := res.Existing[n.Name]; len(virtual) > 0 {
			cp := *n
			cp.Pods = append(append([]*corev1.Pod(nil), n.Pods...), virtual...)
			n = &cp
		}
		out[i] = n
	}
	return out
}

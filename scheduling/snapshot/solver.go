package snapshot

import "github.com/karpenter-policy/karpenter/scheduling/solver"

// SolverInput is the solver's input for the snapshot: its pending pods, the nodes and
// in-flight NodeClaims that offer room, and the NodePools that can launch, with the DaemonSet
// overhead each one's nodes would carry. The provisioner and karpenterctl simulate solve it.
func (s *Snapshot) SolverInput() *solver.Input {
	in := &solver.Input{Pods: s.Pods, Nodes: s.Nodes, Requests: s.Requests, VolumeRequirements: s.VolumeRequirements, PodVolumes: s.PodVolumes}
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

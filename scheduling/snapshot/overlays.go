package snapshot

import (
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
)

// applyOverlays puts the NodeOverlays into the NodePools' instance types, so that every
// decision read from the snapshot (the solver's prices, disruption's savings, the policy
// layer's dollars, a node's price by its labels) sees the same overlaid prices and capacity
// (docs/architecture.md, "NodeOverlays").
func (s *Snapshot) applyOverlays(objs []*karpv1alpha1.NodeOverlay, pools []overlay.Pool, memo *overlay.Memo) {
	if len(objs) == 0 || len(pools) == 0 {
		return
	}
	set, applied := memo.Apply(objs, pools)
	s.Overlays = set
	for name, its := range applied {
		s.instanceTypes[name] = its
	}
}

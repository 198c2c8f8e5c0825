package static

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// refillable reports whether the pool launches again what goes: it is Ready and not being
// deleted. Terminating first anywhere else would leave the workload with no node to return
// to (upstream's rule).
func refillable(np *karpv1.NodePool) bool {
	return np.DeletionTimestamp == nil && meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady)
}

// surveyLaunch fills what TerminateFirstDrift decides by: whether the pool can launch a node
// now, and if not, which drifted NodeClaims hold a capacity reservation slot that, once free,
// would let it (upstream's full reservations, seen through the solver: a freed slot counts
// when the pool's template can launch into it).
func (c *Controller) surveyLaunch(ctx context.Context, np *karpv1.NodePool, s *Survey) error {
	s.TerminateFirst = true
	its, err := c.instanceTypes(ctx, np)
	if err != nil {
		return err
	}
	_, err = Shape(np, its)
	if err == nil {
		return nil
	}
	s.CannotLaunch = err.Error()
	s.FreesRoom = map[*karpv1.NodeClaim]bool{}
	for _, nc := range s.Drifted {
		id := nc.Labels[karpv1.LabelCapacityReservationID]
		if id == "" || nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeReserved {
			continue
		}
		if _, err := shapeFreeing(np, its, map[string]int{id: 1}); err == nil {
			s.FreesRoom[nc] = true
		}
	}
	return nil
}

// terminateFirstForRoom is the drift step of a pool that cannot launch a node (with
// TerminateFirstDrift): of the k drifted nodes the budget allows, those holding a
// reservation slot the pool can launch into again go first; the others are blocked, as no
// replacement can launch for them either way.
func terminateFirstForRoom(s Survey, k int) Action {
	var first, rest []*karpv1.NodeClaim
	for _, nc := range s.Drifted {
		if s.FreesRoom[nc] {
			first = append(first, nc)
		} else {
			rest = append(rest, nc)
		}
	}
	act := Action{Wait: true, BlockedWhy: "static NodePool cannot stage a replacement: " + s.CannotLaunch}
	for i, nc := range append(first, rest...)[:k] {
		if i < len(first) {
			act.Delete = append(act.Delete, nc)
		} else {
			act.Blocked = append(act.Blocked, nc)
		}
	}
	if len(act.Delete) > 0 {
		act.Why, act.TerminateFirst = WhyTerminateFirst, methods.TerminateFirstNoReservedCapacity
	}
	return act
}

package planner

import (
	"context"

	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Decide is the one place that chooses between the policies and the solver alone: with a
// planner the batch goes through the policies (Planner.Solve, which solves again as they
// ask); without one, the input is solved as it is, from pr when the caller prepared it
// already (nil: prepared here). The provisioner, karpenterctl simulate and simulate
// --disrupt decide through it; the Outcome is nil without a planner.
func Decide(ctx context.Context, p *Planner, in *solver.Input, pr *solver.Prepared) (*solver.Result, *Outcome, error) {
	if p != nil {
		out, err := p.Solve(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		return out.Result, out, nil
	}
	if pr == nil {
		res, err := solver.Solve(in)
		return res, nil, err
	}
	res, err := pr.Solve()
	return res, nil, err
}

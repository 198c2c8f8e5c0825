package policies

import (
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
)

// SpotTolerance is how far, in percentage points, a Spot share may pass a bound and still be
// within it: shares are sums of float vCPU, and a share that meets a bound exactly must not be
// judged outside it by a rounding error.
const SpotTolerance = 0.01

// SpotShare is a namespace's Spot share as its CapacityBudget judges it; docs/policies.md
// ("Spot share") is the definition, and this type and SpotBounds.Share are its only
// implementation: the solver's spot assignment, the launch gate and every Rego decision point
// (through the karpenter.spot_share built-in), the budget's status, condition and metric, and
// karpenterctl simulate all read it.
type SpotShare struct {
	// Percent is 100 x Spot vCPU / (Spot vCPU + the on-demand vCPU above the on-demand base);
	// 0 when nothing runs above the base.
	Percent float64
	// Counted is false when nothing runs above the base: there is no share to bound, and it
	// is in range whatever the bounds.
	Counted bool
}

// Share is the Spot share of spotCPU and onDemandCPU vCPU requested under these bounds.
func (b SpotBounds) Share(spotCPU, onDemandCPU float64) SpotShare {
	above := spotCPU + max(0, onDemandCPU-b.OnDemandBaseCPU)
	if above <= 0 {
		return SpotShare{}
	}
	return SpotShare{Percent: 100 * spotCPU / above, Counted: true}
}

// Below reports whether a counted share is under the minimum by more than SpotTolerance.
func (b SpotBounds) Below(s SpotShare) bool {
	return s.Counted && s.Percent < b.MinPercent-SpotTolerance
}

// Above reports whether a counted share is over the maximum by more than SpotTolerance.
func (b SpotBounds) Above(s SpotShare) bool {
	return s.Counted && s.Percent > b.MaxPercent+SpotTolerance
}

// InRange reports whether the share is within the bounds (an uncounted share always is).
func (b SpotBounds) InRange(s SpotShare) bool { return !b.Below(s) && !b.Above(s) }

// SpotShare is the namespace's Spot share under the bounds.
func (u Usage) SpotShare(b SpotBounds) SpotShare { return b.Share(u.SpotCPU, u.OnDemandCPU) }

// SpecSpotBounds are a CapacityBudget's Spot bounds as its spec states them, schedule windows
// aside (the engine's BudgetInForce applies those): for when the budget cannot be evaluated.
func SpecSpotBounds(b *policyv1.CapacityBudget) SpotBounds {
	out := NoSpotBounds
	if s := b.Spec.Spot; s != nil {
		if s.MinPercent != nil {
			out.MinPercent = float64(*s.MinPercent)
		}
		if s.MaxPercent != nil {
			out.MaxPercent = float64(*s.MaxPercent)
		}
		if s.OnDemandBaseCPU != nil {
			out.OnDemandBaseCPU = s.OnDemandBaseCPU.AsApproximateFloat64()
		}
	}
	return out
}

// NoSpotBounds are the bounds of a namespace without a budget: any share, no on-demand base.
var NoSpotBounds = SpotBounds{MaxPercent: 100}

// spotShareBuiltin is karpenter.spot_share(spotCPU, onDemandCPU, bounds) for Rego, bounds
// being {"minPercent", "maxPercent", "onDemandBaseCPU"}: the Go definition above, so that
// policies cannot judge a share differently. It returns {"percent", "counted", "inRange",
// "below", "above"}.
var spotShareBuiltin = &rego.Function{
	Name:        "karpenter.spot_share",
	Description: "A namespace's Spot share under a CapacityBudget's bounds (docs/policies.md, Spot share).",
	Decl: types.NewFunction(types.Args(
		types.Named("spotCPU", types.N), types.Named("onDemandCPU", types.N),
		types.Named("bounds", types.NewObject(nil, types.NewDynamicProperty(types.S, types.N))),
	), types.Named("share", types.NewObject(nil, types.NewDynamicProperty(types.S, types.A)))),
	Memoize: true,
}

func init() {
	rego.RegisterBuiltin3(spotShareBuiltin, func(_ rego.BuiltinContext, spot, onDemand, bounds *ast.Term) (*ast.Term, error) {
		num := func(t *ast.Term) float64 {
			n, _ := t.Value.(ast.Number)
			f, _ := n.Float64()
			return f
		}
		b := SpotBounds{MinPercent: 0, MaxPercent: 100}
		if obj, ok := bounds.Value.(ast.Object); ok {
			if v := obj.Get(ast.StringTerm("minPercent")); v != nil {
				b.MinPercent = num(v)
			}
			if v := obj.Get(ast.StringTerm("maxPercent")); v != nil {
				b.MaxPercent = num(v)
			}
			if v := obj.Get(ast.StringTerm("onDemandBaseCPU")); v != nil {
				b.OnDemandBaseCPU = num(v)
			}
		}
		s := b.Share(num(spot), num(onDemand))
		return ast.ObjectTerm(
			ast.Item(ast.StringTerm("percent"), ast.FloatNumberTerm(s.Percent)),
			ast.Item(ast.StringTerm("counted"), ast.BooleanTerm(s.Counted)),
			ast.Item(ast.StringTerm("inRange"), ast.BooleanTerm(b.InRange(s))),
			ast.Item(ast.StringTerm("below"), ast.BooleanTerm(b.Below(s))),
			ast.Item(ast.StringTerm("above"), ast.BooleanTerm(b.Above(s))),
		), nil
	})
}

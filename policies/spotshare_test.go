package policies

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/karpenter-policy/karpenter/test"
)

// The Go definition and the Rego library (through the karpenter.spot_share built-in) give the
// same share and the same range verdict on every case.
func TestSpotShareOneDefinition(t *testing.T) {
	c, err := CompileBuiltin(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range test.SpotShareCases {
		b := SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		s := Usage{SpotCPU: tc.SpotCPU, OnDemandCPU: tc.OnDemandCPU}.SpotShare(b)
		if math.Abs(s.Percent-tc.Percent) > 1e-9 || s.Counted != tc.Counted || b.Below(s) != tc.Below || b.Above(s) != tc.Above || b.InRange(s) != tc.InRange {
			t.Errorf("%s: Go says %+v below=%v above=%v inRange=%v", tc.Name, s, b.Below(s), b.Above(s), b.InRange(s))
		}
		budget := map[string]any{"namespace": "team-a", "name": "default", "spec": map[string]any{"spot": map[string]any{
			"minPercent": tc.MinPercent, "maxPercent": tc.MaxPercent, "onDemandBaseCPU": fmt.Sprint(tc.OnDemandBaseCPU)}}}
		usage := map[string]any{"spotCPU": tc.SpotCPU, "onDemandCPU": tc.OnDemandCPU}
		rs, err := rego.New(rego.Compiler(c.Compiler), rego.Input(map[string]any{"b": budget, "u": usage}),
			rego.Query(`inRange := count({1 | data.karpenter.budget.spot_in_range(input.b, input.u)}) == 1
				shares := [s | s := data.karpenter.budget.spot_share_above_base(input.b, input.u)]
				share := array.concat(shares, [-1])[0]`),
		).Eval(context.Background())
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: evaluating the Rego library: %v (%d results)", tc.Name, err, len(rs))
		}
		inRange, _ := rs[0].Bindings["inRange"].(bool)
		share := toFloat(rs[0].Bindings["share"])
		want := tc.Percent
		if !tc.Counted {
			want = -1 // spot_share_above_base is undefined
		}
		if inRange != tc.InRange || math.Abs(share-want) > 1e-9 {
			t.Errorf("%s: Rego says share %v, in range %v; want %v, %v", tc.Name, share, inRange, want, tc.InRange)
		}
	}
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case interface{ Float64() (float64, error) }:
		f, _ := n.Float64()
		return f
	}
	return math.NaN()
}

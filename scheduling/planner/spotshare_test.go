package planner

import (
	"testing"

	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/test"
)

// The planner's Spot assignment judges a share below its minimum or above its maximum exactly
// as the definition does.
func TestPlannerSpotChecksAgreeWithTheDefinition(t *testing.T) {
	for _, tc := range test.SpotShareCases {
		b := policies.SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		if got := belowMinimum(b, tc.SpotCPU, tc.OnDemandCPU); got != tc.Below {
			t.Errorf("%s: belowMinimum %v, want %v", tc.Name, got, tc.Below)
		}
		if got := aboveMaximum(b, tc.SpotCPU, tc.OnDemandCPU); got != tc.Above {
			t.Errorf("%s: aboveMaximum %v, want %v", tc.Name, got, tc.Above)
		}
	}
}

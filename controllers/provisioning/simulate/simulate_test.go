package simulate

import (
	"math"
	"testing"

	"github.com/karpenter-policy/karpenter/controllers/provisioning/policy"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/test"
)

// karpenterctl simulate reports the Spot share's one answer, whether the usage was there
// before the batch or the batch added it.
func TestSimulateSpotPercentAgreesWithTheDefinition(t *testing.T) {
	for _, tc := range test.SpotShareCases {
		b := policies.SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		ns := &policy.Namespace{Before: policies.Usage{SpotCPU: tc.SpotCPU / 2, OnDemandCPU: tc.OnDemandCPU},
			Added: policies.Usage{SpotCPU: tc.SpotCPU / 2}, Budget: &policies.BudgetInForce{Spot: b}}
		if got := SpotPercent(ns); math.Abs(got-tc.Percent) > 1e-9 {
			t.Errorf("%s: simulate reports %.4f%%, want %.4f%%", tc.Name, got, tc.Percent)
		}
	}
}

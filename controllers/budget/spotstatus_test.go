package budget

import (
	"math"
	"strconv"
	"testing"

	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/test"
)

// The budget's status, its SpotShareOutOfRange condition and the karpenter_budget_spot_percent
// gauge give the Spot share's one answer on every case.
func TestSpotStatusAgreesWithTheDefinition(t *testing.T) {
	for _, tc := range test.SpotShareCases {
		b := policies.SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		st := SpotStatusOf(policies.Usage{SpotCPU: tc.SpotCPU, OnDemandCPU: tc.OnDemandCPU}, b)
		if math.Abs(st.Value-tc.Percent) > 1e-9 || st.OutOfRange == tc.InRange || st.Percent != strconv.FormatFloat(round1(tc.Percent), 'f', 1, 64) {
			t.Errorf("%s: status %+v; want %.3f%%, in range %v", tc.Name, st, tc.Percent, tc.InRange)
		}
	}
}

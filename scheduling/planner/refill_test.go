package planner

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// The chaos suite's capped namespace: 25 pods of 1 vCPU on nodes of 4, 8 or 16 vCPU. Holding
// pods back is decided per NodeClaim: under $0.30/h the batch first packed 10 pods on two
// NodeClaims ($0.16/h) and held the other 15 off a NodeClaim too dear for the $0.14/h left,
// where a 4-vCPU one ($0.054/h) fits. The held pods are tried again on NodeClaims no dearer
// than what is left, until no NodeClaim the pool can launch fits in it.
func TestHeldPodsAreRetriedOnSmallerNodeClaims(t *testing.T) {
	np := pool()
	sizes := []string{"4", "8", "16"}
	np.NodePool.Spec.Template.Spec.Requirements = append(np.NodePool.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpIn, Values: sizes})
	cheapest := 1e9
	for _, it := range catalog.Embedded().ForProvider() {
		if it.Labels[corev1.LabelArchStable] != "amd64" || !slices.Contains(sizes, it.Labels[karpv1.LabelInstanceCPU]) {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available {
				cheapest = min(cheapest, o.Price)
			}
		}
	}
	for _, tc := range []struct {
		limit string
		l     float64
	}{{"0.10", 0.10}, {"0.20", 0.20}, {"0.30", 0.30}, {"0.40", 0.40}, {"1.00", 1.00}} {
		out := solve(t, planner(t, budget("capped", tc.limit)), &solver.Input{Pods: pods("capped", "load", 25, "1", "1Gi"), NodePools: []*solver.NodePool{np}})
		price, placed := 0.0, 0
		for _, c := range out.Result.NodeClaims {
			price += c.Offering.Price
			placed += len(c.Pods)
		}
		held := len(out.Namespaces["capped"].Blocked)
		t.Logf("limit %s: %d NodeClaims at $%.4f/h, %d pods placed, %d held", tc.limit, len(out.Result.NodeClaims), price, placed, held)
		if price > tc.l+budgetTolerance {
			t.Errorf("limit %s: the NodeClaims cost $%.4f/h", tc.limit, price)
		}
		if placed+held != 25 || len(out.Result.Unschedulable) != held {
			t.Errorf("limit %s: %d placed, %d held, %d unschedulable: want every pod placed or held, and only the held unschedulable", tc.limit, placed, held, len(out.Result.Unschedulable))
		}
		if left := tc.l + budgetTolerance - price; held > 0 && left >= cheapest {
			t.Errorf("limit %s: %d pods held with $%.4f/h left, where a NodeClaim of $%.4f/h fits", tc.limit, held, left, cheapest)
		}
	}
}

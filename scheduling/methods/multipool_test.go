package methods

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Multi-node consolidation across NodePools takes from each pool no more than its own
// Underutilized budget allows, and a pool whose budget is spent adds none of its nodes.
func TestMultiNodeAcrossPoolBudgets(t *testing.T) {
	for name, tc := range map[string]struct {
		defaultBudget, batchBudget string
		wantDefault, wantBatch     int
	}{
		"both open":               {"100%", "100%", -1, -1},
		"one of default":          {"1", "100%", 1, -1},
		"none of batch":           {"100%", "0", -1, 0},
		"one of each":             {"1", "1", 1, 1},
		"none of batch by reason": {"100%", "0,Underutilized", -1, 0},
	} {
		t.Run(name, func(t *testing.T) {
			budgetOf := func(s string) karpv1.Budget {
				if s == "0,Underutilized" {
					return budget("0", karpv1.DisruptionReasonUnderutilized)
				}
				return budget(s)
			}
			pools := []*karpv1.NodePool{nodePool("default", onDemandOnly, withBudgets(budgetOf(tc.defaultBudget))),
				nodePool("batch", onDemandOnly, withBudgets(budgetOf(tc.batchBudget), budget("100%", karpv1.DisruptionReasonEmpty)))}
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for i := range 6 {
				pool := "default"
				if i%2 == 1 {
					pool = "batch"
				}
				name := fmt.Sprintf("%s-%d", pool, i)
				nodes = append(nodes, node(name, "m5.xlarge", "on-demand", "z-a", inPool(pool)))
				pods = append(pods, pod("w-"+name, name, "500m", "1Gi"))
			}
			cmds := commands(t, &MultiNode{}, world{pools: pools, nodes: nodes, pods: pods}.cluster())
			per := map[string]int{}
			for _, cmd := range cmds {
				for _, cand := range cmd.Candidates {
					per[cand.NodePoolName()]++
				}
			}
			if tc.wantDefault >= 0 && per["default"] > tc.wantDefault {
				t.Errorf("%d of default's nodes, its budget allows %d", per["default"], tc.wantDefault)
			}
			if tc.wantBatch >= 0 && per["batch"] > tc.wantBatch {
				t.Errorf("%d of batch's nodes, its budget allows %d", per["batch"], tc.wantBatch)
			}
			if tc.wantDefault < 0 && tc.wantBatch < 0 && per["default"]+per["batch"] < 4 {
				t.Errorf("budgets open: %v, want most of the six half-empty nodes", per)
			}
		})
	}
}

package planner

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
	"github.com/karpenter-policy/karpenter/test/bench"
)

// The same batch under the same policies is planned the same way every time: which pods are
// held, which NodeClaims launch with which pods. karpenterctl plan on a pull request and the
// controller after the sync must agree, and a figure in docs/benchmarks.md must mean
// something. Tight budgets and Spot bounds make ties common: a tie broken by map order (a sum
// in map order, in spotByClaim, did) shows within a few runs.
func TestSolveIsDeterministic(t *testing.T) {
	t.Run("namespace budgets", func(t *testing.T) { solvesTheSame(t, false) })
	// The same namespaces, half of them also under a ClusterCapacityBudget with Spot bounds
	// of its own: the accounts' sums and orders must not depend on map order either.
	t.Run("with a team budget", func(t *testing.T) { solvesTheSame(t, true) })
}

func solvesTheSame(t *testing.T, team bool) {
	p, names := benchPlanner(t, "2")
	if team {
		for i, name := range names {
			if i%2 == 0 {
				ns := p.Namespaces[name]
				ns.Labels = map[string]string{"tier": ns.Labels["tier"], "team": "evens"}
				p.Namespaces[name] = ns
			}
		}
		p.ClusterBudgets = ClusterBudgets([]*policyv1.ClusterCapacityBudget{clusterBudget("evens", "evens", "12", func(c *policyv1.ClusterCapacityBudget) {
			c.Spec.Spot = &policyv1.SpotShare{MaxPercent: ptr(int32(70))}
		})})
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
	}}}}
	in := &solver.Input{Pods: bench.MixedPodsIn(2000, names), NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: bench.SyntheticTypes(200)}}}
	var first string
	for i := range 8 {
		out, err := p.Solve(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var held []string
		for _, b := range out.Blocked {
			held = append(held, b.Pod.Namespace+"/"+b.Pod.Name)
		}
		sort.Strings(held)
		h := sha256.New()
		fmt.Fprintln(h, held)
		for _, c := range out.Result.NodeClaims {
			fmt.Fprintln(h, c.InstanceType.Name, c.Offering.CapacityType, c.Offering.Zone)
			for _, pod := range c.Pods {
				fmt.Fprint(h, pod.Namespace, "/", pod.Name, " ")
			}
		}
		got := fmt.Sprintf("%d held, %d NodeClaims at $%.4f/h (%x)", len(held), len(out.Result.NodeClaims), out.Result.PricePerHour(), h.Sum(nil)[:8])
		if i == 0 {
			first = got
			continue
		}
		if got != first {
			t.Fatalf("run %d planned %s; run 0 planned %s", i, got, first)
		}
	}
	t.Log(first)
}

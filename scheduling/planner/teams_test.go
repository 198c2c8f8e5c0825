package planner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

func clusterBudget(name, team, hourly string, f ...func(*policyv1.ClusterCapacityBudget)) *policyv1.ClusterCapacityBudget {
	m := policyv1.Money(hourly)
	c := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: policyv1.ClusterCapacityBudgetSpec{
		NamespaceSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"team": team}},
		CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &m}, Enforcement: policyv1.EnforcementDeny}}}
	for _, fn := range f {
		fn(c)
	}
	return c
}

// teamPlanner is a planner with namespaces labelled team=NAME and the cluster budgets.
func teamPlanner(t *testing.T, teams map[string]string, cbs []*policyv1.ClusterCapacityBudget, budgets ...*policyv1.CapacityBudget) *Planner {
	t.Helper()
	p := planner(t, budgets...)
	for ns, team := range teams {
		p.Namespaces[ns] = policies.Namespace{Name: ns, Labels: map[string]string{"team": team}}
	}
	p.ClusterBudgets = ClusterBudgets(cbs)
	return p
}

// maxNodePrice is the dearest offering a result launches.
func maxNodePrice(res *solver.Result) float64 {
	m := 0.0
	for _, c := range res.NodeClaims {
		m = max(m, c.Offering.Price)
	}
	return m
}

// A burst in three namespaces of one team, each with room of its own: what the batch
// launches for them together stays within the team's limit (the in-flight reservation is the
// team's), by no more than one node's price, and the pods held name the ClusterCapacityBudget.
// A namespace of another team is not held.
func TestClusterBudgetSharesItsLimitAcrossNamespaces(t *testing.T) {
	teams := map[string]string{"red-a": "red", "red-b": "red", "red-c": "red", "blue": "blue"}
	p := teamPlanner(t, teams, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "0.50")},
		budget("red-a", "1.00"), budget("red-b", "1.00"), budget("red-c", "1.00"))
	var all []*corev1.Pod
	for _, ns := range []string{"red-a", "red-b", "red-c", "blue"} {
		all = append(all, pods(ns, "web", 40, "1", "2Gi")...)
	}
	out := solve(t, p, &solver.Input{Pods: all, NodePools: []*solver.NodePool{pool()}})
	spent := attributed(out.Result)
	red := spent["red-a"] + spent["red-b"] + spent["red-c"]
	// Launch decisions charge the idle room too, so the pods' share ends below the limit.
	launched := 0.0
	for _, c := range out.Result.NodeClaims {
		for _, pod := range c.Pods {
			if strings.HasPrefix(pod.Namespace, "red-") {
				launched += c.Offering.Price
				break
			}
		}
	}
	if launched > 0.50+maxNodePrice(out.Result)+budgetTolerance {
		t.Errorf("the team's NodeClaims cost %.4f/hour, over its 0.50 limit by more than a node", launched)
	}
	if red < 0.20 {
		t.Errorf("the team's pods are attributed only %.4f/hour of 0.50: the budget should be used", red)
	}
	team := out.Teams[TeamKey("red")]
	if team == nil || team.Budget == nil || len(team.Members) != 3 {
		t.Fatalf("the team's account: %+v", team)
	}
	if team.After().HourlyCost+team.After().InFlightHourlyCost > 0.50+budgetTolerance {
		t.Errorf("the team's usage after the batch is %.4f/hour, over 0.50", team.After().HourlyCost+team.After().InFlightHourlyCost)
	}
	held := 0
	for _, ns := range []string{"red-a", "red-b", "red-c"} {
		for _, b := range out.Namespaces[ns].Blocked {
			held++
			if !strings.Contains(b.Violation.Message, "ClusterCapacityBudget red") || b.Violation.Namespace != ns {
				t.Errorf("pod %s/%s held by %q (namespace %q), want the ClusterCapacityBudget", ns, b.Pod.Name, b.Violation.Message, b.Violation.Namespace)
			}
		}
	}
	if held == 0 || held != len(team.Blocked) {
		t.Errorf("%d team pods held, the team's account counts %d", held, len(team.Blocked))
	}
	if n := len(out.Namespaces["blue"].Blocked); n != 0 {
		t.Errorf("%d pods of another team held", n)
	}
}

// Usage already running in one namespace of the team leaves the others only what remains;
// a team at its limit holds every new pod of its namespaces; instance families the team
// refuses are refused to each namespace.
func TestClusterBudgetCountsRunningUsageAndFamilies(t *testing.T) {
	teams := map[string]string{"red-a": "red", "red-b": "red"}
	// A node of red-a running at about $0.77/hour (m5.4xlarge-ish): over the 0.50 limit.
	node := &scheduling.Node{Name: "busy", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.4xlarge"},
		Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
		PricePerHour: 0.768, Pods: pods("red-a", "running", 1, "15", "60Gi")}
	p := teamPlanner(t, teams, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "0.50")})
	out := solve(t, p, &solver.Input{Pods: pods("red-b", "web", 5, "1", "2Gi"), Nodes: []*scheduling.Node{node}, NodePools: []*solver.NodePool{pool()}})
	if n := len(out.Namespaces["red-b"].Blocked); n != 5 {
		t.Errorf("red-b: %d of 5 pods held, want all: the team's red-a already runs past the limit", n)
	}
	for _, b := range out.Namespaces["red-b"].Blocked {
		if !strings.Contains(b.Violation.Message, "ClusterCapacityBudget red") {
			t.Errorf("held by %q", b.Violation.Message)
			break
		}
	}

	fam := teamPlanner(t, teams, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "100", func(c *policyv1.ClusterCapacityBudget) {
		c.Spec.InstanceFamilies = &policyv1.InstanceFamilies{Deny: []string{"m*", "c*", "r*"}}
	})})
	out = solve(t, fam, &solver.Input{Pods: pods("red-a", "web", 3, "1", "2Gi"), NodePools: []*solver.NodePool{pool()}})
	for _, c := range out.Result.NodeClaims {
		if f := Family(c.InstanceType); strings.HasPrefix(f, "m") || strings.HasPrefix(f, "c") || strings.HasPrefix(f, "r") {
			t.Errorf("launched %s for the team, whose ClusterCapacityBudget denies m*, c*, r*", c.InstanceType.Name)
		}
	}
	if len(out.Result.NodeClaims) == 0 {
		t.Error("nothing launched: the team's budget allows other families")
	}
}

func TestClusterBudgetHoldsPods(t *testing.T) {
	p := teamPlanner(t, map[string]string{"red-a": "red", "blue": "blue"}, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "1")})
	if !p.HoldsPods("red-a") || p.HoldsPods("blue") {
		t.Errorf("HoldsPods: red-a %v (want true), blue %v (want false)", p.HoldsPods("red-a"), p.HoldsPods("blue"))
	}
	dry := teamPlanner(t, map[string]string{"red-a": "red"}, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "0.10", func(c *policyv1.ClusterCapacityBudget) {
		c.Spec.Enforcement = policyv1.EnforcementDryRun
	})})
	if dry.HoldsPods("red-a") {
		t.Error("a DryRun ClusterCapacityBudget holds pods")
	}
	out := solve(t, dry, &solver.Input{Pods: pods("red-a", "web", 20, "2", "4Gi"), NodePools: []*solver.NodePool{pool()}})
	if n := len(out.Namespaces["red-a"].Blocked); n != 0 {
		t.Errorf("a DryRun ClusterCapacityBudget held %d pods", n)
	}
	found := false
	for _, v := range out.DryRun {
		found = found || strings.Contains(v.Message, "ClusterCapacityBudget red")
	}
	if !found {
		t.Errorf("no DryRun result names the ClusterCapacityBudget: %v", fmt.Sprint(out.DryRun))
	}
}

// teamBurst is 1000 pods pending at once across 10 namespaces of one team, each namespace
// with a CapacityBudget of its own far above the team's limit.
func teamBurst(t testing.TB, limit string) (*Planner, *solver.Input) {
	teams := map[string]string{}
	var budgets []*policyv1.CapacityBudget
	var all []*corev1.Pod
	for i := range 10 {
		ns := fmt.Sprintf("pay-%d", i)
		teams[ns] = "payments"
		budgets = append(budgets, budget(ns, "50"))
		all = append(all, pods(ns, "web", 100, "500m", "1Gi")...)
	}
	e, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	p := &Planner{Engine: e, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}, Now: now}
	for _, b := range budgets {
		p.Budgets[b.Namespace] = b
	}
	for ns, team := range teams {
		p.Namespaces[ns] = policies.Namespace{Name: ns, Labels: map[string]string{"team": team}}
	}
	p.ClusterBudgets = ClusterBudgets([]*policyv1.ClusterCapacityBudget{clusterBudget("payments", "payments", limit)})
	return p, &solver.Input{Pods: all, NodePools: []*solver.NodePool{pool()}}
}

// 1000 pods pending at once across 10 namespaces: what the batch launches for the team costs
// no more than its limit plus one node's price, and its run-rate after the batch stays within
// the limit.
func TestClusterBudgetHoldsABurstAcrossTenNamespaces(t *testing.T) {
	p, in := teamBurst(t, "2.00")
	out := solve(t, p, in)
	launched := 0.0
	for _, c := range out.Result.NodeClaims {
		launched += c.Offering.Price
	}
	team := out.Teams[TeamKey("payments")]
	runRate := team.After().HourlyCost + team.After().InFlightHourlyCost
	t.Logf("launched $%.4f/hour on %d NodeClaims, run-rate $%.4f, %d pods held, limit $2.00", launched, len(out.Result.NodeClaims), runRate, len(team.Blocked))
	if launched > 2.00+maxNodePrice(out.Result)+budgetTolerance {
		t.Errorf("launched $%.4f/hour for a $2.00 team limit (dearest node $%.4f)", launched, maxNodePrice(out.Result))
	}
	if runRate > 2.00+budgetTolerance || runRate < 1.0 {
		t.Errorf("the team's run-rate after the batch is $%.4f/hour of its $2.00", runRate)
	}
	if len(team.Blocked) == 0 || len(team.Blocked) == 1000 {
		t.Errorf("%d of 1000 pods held", len(team.Blocked))
	}
}

// The planner with a ClusterCapacityBudget over 10 namespaces, 1000 pods pending:
//
//	go test ./scheduling/planner -run='^$' -bench=TeamBurst -benchmem
func BenchmarkTeamBurst(b *testing.B) {
	for b.Loop() {
		p, in := teamBurst(b, "2.00")
		if _, err := p.Solve(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// A ClusterCapacityBudget's Spot maximum bounds its namespaces' Spot share together, none of
// them bounded on its own: what the batch launches for them ends within it; with maxPercent
// 0, nothing of theirs launches on Spot.
func TestClusterBudgetBoundsTheTeamsSpotShare(t *testing.T) {
	teams := map[string]string{"red-a": "red", "red-b": "red", "red-c": "red"}
	var all []*corev1.Pod
	for _, ns := range []string{"red-a", "red-b", "red-c"} {
		all = append(all, pods(ns, "web", 20, "1", "2Gi")...)
	}
	for _, maxPercent := range []int32{40, 0} {
		p := teamPlanner(t, teams, []*policyv1.ClusterCapacityBudget{clusterBudget("red", "red", "100", func(c *policyv1.ClusterCapacityBudget) {
			c.Spec.Spot = &policyv1.SpotShare{MaxPercent: &maxPercent}
		})})
		out := solve(t, p, &solver.Input{Pods: all, NodePools: []*solver.NodePool{pool()}})
		team := out.Teams[TeamKey("red")]
		after := team.After()
		share := team.Budget.Spot.Share(after.SpotCPU, after.OnDemandCPU)
		t.Logf("maxPercent %d: %.0f vCPU on Spot, %.0f on-demand: %.1f%%", maxPercent, after.SpotCPU, after.OnDemandCPU, share.Percent)
		if after.SpotCPU+after.OnDemandCPU != 60 || len(out.Blocked) != 0 {
			t.Fatalf("maxPercent %d: %.0f vCPU placed, %d held; want all 60", maxPercent, after.SpotCPU+after.OnDemandCPU, len(out.Blocked))
		}
		if !team.Budget.Spot.InRange(share) {
			t.Errorf("maxPercent %d: the team's Spot share is %.1f%%", maxPercent, share.Percent)
		}
		if maxPercent == 40 && after.SpotCPU == 0 {
			t.Error("maxPercent 40: nothing on Spot; the cheaper Spot should be used up to the maximum")
		}
	}
}

package methods

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// The policy gate on disruption (PolicyCheck): a CapacityBudget's Spot range, hourly limit and
// instance families refuse the commands that would break them, with the budget named; Warn
// budgets let them through; namespaces without a budget are not held.

func teamBudget(ns string, mut ...func(*policyv1.CapacityBudgetSpec)) *policyv1.CapacityBudget {
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: ns, Namespace: ns}, Spec: policyv1.CapacityBudgetSpec{Enforcement: policyv1.EnforcementDeny}}
	for _, m := range mut {
		m(&b.Spec)
	}
	return b
}

func spotRange(minPct, maxPct int32) func(*policyv1.CapacityBudgetSpec) {
	return func(s *policyv1.CapacityBudgetSpec) {
		s.Spot = &policyv1.SpotShare{MinPercent: ptr.To(minPct), MaxPercent: ptr.To(maxPct)}
	}
}

func hourly(limit string) func(*policyv1.CapacityBudgetSpec) {
	return func(s *policyv1.CapacityBudgetSpec) {
		m := policyv1.Money(limit)
		s.Limits = &policyv1.BudgetLimits{HourlyCost: &m}
	}
}

func denyFamilies(patterns ...string) func(*policyv1.CapacityBudgetSpec) {
	return func(s *policyv1.CapacityBudgetSpec) { s.InstanceFamilies = &policyv1.InstanceFamilies{Deny: patterns} }
}

func warnOnly(s *policyv1.CapacityBudgetSpec) { s.Enforcement = policyv1.EnforcementWarn }

func inNamespace(ns string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Namespace = ns } }

// gated runs single-node consolidation on the world with a policy gate of the budgets, and
// returns its commands and the violations the gate reported.
func gated(t *testing.T, w world, withEngine bool, budgets ...*policyv1.CapacityBudget) (string, []policies.Violation) {
	t.Helper()
	var engine *policies.Engine
	if withEngine {
		var err error
		if engine, err = policies.NewEngine(); err != nil {
			t.Fatal(err)
		}
	}
	byNS := map[string]*policyv1.CapacityBudget{}
	for _, b := range budgets {
		byNS[b.Namespace] = b
	}
	c := w.cluster()
	g := NewPolicyCheck(&planner.Planner{Engine: engine, Now: now, Namespaces: map[string]policies.Namespace{}, Budgets: byNS}, c)
	var refused []policies.Violation
	g.OnRefusal = func(_ *Command, vs []policies.Violation) { refused = append(refused, vs...) }
	c.Check = g
	return strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | "), refused
}

func TestPolicyCheckSpotRange(t *testing.T) {
	// team-a runs one on-demand pod of 1 vCPU; the cheapest replacement is Spot.
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi", inNamespace("team-a"))}}
	for name, tc := range map[string]struct {
		budget    *policyv1.CapacityBudget
		engine    bool
		want      string
		refusedBy string
	}{
		"no budget: Spot it is":            {want: "replace:a+c5.large/spot"},
		"a Spot share capped at 0%":        {budget: teamBudget("team-a", spotRange(0, 0)), want: "replace:a+c5.large/on-demand", refusedBy: "CapacityBudget team-a/team-a"},
		"a Spot share of up to 100%":       {budget: teamBudget("team-a", spotRange(0, 100)), want: "replace:a+c5.large/spot"},
		"a cap at 0% that only warns":      {budget: teamBudget("team-a", spotRange(0, 0), warnOnly), want: "replace:a+c5.large/spot"},
		"a budget of another namespace":    {budget: teamBudget("team-b", spotRange(0, 0)), want: "replace:a+c5.large/spot"},
		"the engine agrees with the range": {budget: teamBudget("team-a", spotRange(0, 0)), engine: true, want: "replace:a+c5.large/on-demand", refusedBy: "CapacityBudget team-a/team-a"},
	} {
		t.Run(name, func(t *testing.T) {
			var budgets []*policyv1.CapacityBudget
			if tc.budget != nil {
				budgets = append(budgets, tc.budget)
			}
			got, refused := gated(t, w, tc.engine, budgets...)
			if got != tc.want {
				t.Fatalf("commands %q, want %q (refused %+v)", got, tc.want, refused)
			}
			if tc.refusedBy != "" {
				if len(refused) == 0 || !strings.Contains(refused[0].Message, tc.refusedBy) || refused[0].Namespace != "team-a" {
					t.Fatalf("refusals %+v, want one naming %s for team-a", refused, tc.refusedBy)
				}
			} else if len(refused) > 0 {
				t.Fatalf("refusals %+v, want none", refused)
			}
		})
	}
}

func TestPolicyCheckFamilies(t *testing.T) {
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi", inNamespace("team-a"))}}
	for name, tc := range map[string]struct {
		budget *policyv1.CapacityBudget
		want   func(string) bool
	}{
		"c5 denied: not c5": {budget: teamBudget("team-a", denyFamilies("c5*"), hourly("100")), want: func(got string) bool {
			return got != "" && !strings.Contains(got, "+c5")
		}},
		"m5 denied: c5 still fine": {budget: teamBudget("team-a", denyFamilies("m5*"), hourly("100")), want: func(got string) bool {
			return strings.HasPrefix(got, "replace:a+c5.large")
		}},
		"every family denied: nothing": {budget: teamBudget("team-a", denyFamilies("*"), hourly("100")), want: func(got string) bool { return got == "" }},
		"denied but warn only": {budget: teamBudget("team-a", denyFamilies("c5*"), hourly("100"), warnOnly), want: func(got string) bool {
			return strings.HasPrefix(got, "replace:a+c5.large")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			got, refused := gated(t, w, true, tc.budget)
			if !tc.want(got) {
				t.Fatalf("commands %q (refused %+v)", got, refused)
			}
		})
	}
}

// A namespace over its hourly limit may have its cost lowered, never raised: a command that
// moves its pods to a dearer place is refused; one that saves it money goes ahead.
func TestPolicyCheckHourlyLimit(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.2xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", inNamespace("team-a")), pod("w2", "b", "1", "2Gi", inNamespace("team-a"))}}
	got, refused := gated(t, w, true, teamBudget("team-a", hourly("0.01")))
	if got == "" {
		t.Fatalf("a saving command for a namespace over its limit must go ahead (refused %+v)", refused)
	}
	for _, v := range refused {
		if v.Namespace == "team-a" && strings.Contains(v.Message, "hourly") {
			t.Errorf("refused a command that lowers team-a's cost: %+v", v)
		}
	}
}

// Without an engine, the gate still holds Spot ranges and names nothing else.
func TestPolicyCheckWithoutEngine(t *testing.T) {
	w := world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", inNamespace("team-a")), pod("w2", "b", "1", "2Gi")}}
	got, refused := gated(t, w, false, teamBudget("team-a", hourly("0.0001"), denyFamilies("*")))
	if got == "" || len(refused) != 0 {
		t.Fatalf("commands %q, refusals %+v: without an engine only Spot ranges hold", got, refused)
	}
}

func TestPolicyCheckCostDeltas(t *testing.T) {
	// team-a's pod moves from a (on-demand) to b; team-b's stays. Only team-a's cost changes.
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", inNamespace("team-a")), pod("w2", "b", "1", "2Gi", inNamespace("team-b"))}}
	c := w.cluster()
	cmds := commands(t, &SingleNode{}, c)
	if len(cmds) != 1 || cmds[0].Decision != DecisionDelete {
		t.Fatalf("commands %v, want one delete", commandNames(cmds))
	}
	d := costDeltas(c, cmds[0])
	moved := "team-a"
	if cmds[0].Candidates[0].Name() == "b" {
		moved = "team-b"
	}
	if len(d) != 1 {
		t.Fatalf("deltas %+v, want only %s's", d, moved)
	}
	// Moving between nodes of the same type and price changes nothing.
	if got := d[moved]; got.cost > 1e-9 || got.cost < -1e-9 || got.onDemandCPU != 0 || got.spotCPU != 0 {
		t.Fatalf("delta %+v, want zero (same type, same capacity type)", got)
	}
}

// A replacement onto Spot shifts the namespace's vCPU from on-demand to Spot.
func TestPolicyCheckCostDeltaToSpot(t *testing.T) {
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi", inNamespace("team-a"))}}
	c := w.cluster()
	cmds := commands(t, &SingleNode{}, c)
	if len(cmds) != 1 || cmds[0].Replacements[0].Offering.CapacityType != karpv1.CapacityTypeSpot {
		t.Fatalf("commands %v, want a Spot replacement", commandNames(cmds))
	}
	d := costDeltas(c, cmds[0])["team-a"]
	if d.spotCPU != 1 || d.onDemandCPU != -1 || d.cost >= 0 {
		t.Fatalf("delta %+v, want +1 Spot vCPU, -1 on-demand and a saving", d)
	}
	if reason := (&PolicyCheck{Planner: &planner.Planner{}}).Check(context.Background(), c, cmds[0]); reason != "" {
		t.Fatalf("no budgets, no engine: refused %q", reason)
	}
}

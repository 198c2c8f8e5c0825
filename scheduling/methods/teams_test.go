package methods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// A replacement onto a family a ClusterCapacityBudget refuses is refused for the namespaces
// it selects, with the budget named; without it, the same node is replaced.
func TestClusterBudgetRefusesAReplacementItsFamiliesRefuse(t *testing.T) {
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	inTeam := func(p *corev1.Pod) { p.Namespace = "pay-a" }
	w := world{nodes: []*corev1.Node{node("a", "m5.2xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("web", "a", "500m", "1Gi", inTeam)}}
	gate := func(cbs ...*policyv1.ClusterCapacityBudget) *PolicyCheck {
		return &PolicyCheck{Planner: &planner.Planner{Engine: engine, Now: now, Budgets: map[string]*policyv1.CapacityBudget{},
			Namespaces:     map[string]policies.Namespace{"pay-a": {Name: "pay-a", Labels: map[string]string{"team": "payments"}}},
			ClusterBudgets: planner.ClusterBudgets(cbs)}}
	}
	c := w.cluster()
	c.Check = gate()
	free := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | ")
	if !strings.HasPrefix(free, "replace:a+") {
		t.Fatalf("without a team budget: %q, want a replacement of a", free)
	}
	family := strings.SplitN(strings.TrimPrefix(free, "replace:a+"), ".", 2)[0]
	hourly := policyv1.Money("100")
	cb := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "payments"}, Spec: policyv1.ClusterCapacityBudgetSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
		CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Enforcement: policyv1.EnforcementDeny,
			InstanceFamilies: &policyv1.InstanceFamilies{Deny: []string{family + "*"}}}}}
	c = w.cluster()
	g := gate(cb)
	var refused []policies.Violation
	g.OnRefusal = func(_ *Command, vs []policies.Violation) { refused = append(refused, vs...) }
	c.Check = g
	got := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | ")
	if strings.Contains(got, "+"+family) {
		t.Errorf("with the team denying %s*: %q", family, got)
	}
	if len(refused) == 0 || !strings.Contains(refused[0].Message, "ClusterCapacityBudget payments") || refused[0].Namespace != "" {
		t.Errorf("refusals %+v, want the ClusterCapacityBudget named, with no namespace", refused)
	}
}

// Consolidation tries first the nodes running pods of a team over its ClusterCapacityBudget:
// b (pods of pay-b, whose team is over) goes before a, though a is cheaper to disrupt.
func TestConsolidationPrefersTeamsOverBudget(t *testing.T) {
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	inPayB := func(p *corev1.Pod) { p.Namespace = "pay-b" }
	pinned := func(p *corev1.Pod) { p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"} }
	w := world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("web", "a", "500m", "1Gi"), pod("job-0", "b", "500m", "1Gi", inPayB), pod("job-1", "b", "500m", "1Gi", inPayB),
			pod("db", "c", "1", "2Gi", pinned)}}
	for name, tc := range map[string]struct {
		limit policyv1.Money
		want  string
	}{
		"the team over its limit: its node first":   {"0.01", "delete:b"},
		"the team within its limit: cheapest first": {"1.00", "delete:a"},
	} {
		t.Run(name, func(t *testing.T) {
			limit := tc.limit
			cb := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "payments"}, Spec: policyv1.ClusterCapacityBudgetSpec{
				NamespaceSelector:  metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
				CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &limit}, Enforcement: policyv1.EnforcementDeny}}}
			c := w.cluster()
			c.Check = NewPolicyCheck(&planner.Planner{Engine: engine, Now: now, Budgets: map[string]*policyv1.CapacityBudget{},
				Namespaces:     map[string]policies.Namespace{"pay-b": {Name: "pay-b", Labels: map[string]string{"team": "payments"}}},
				ClusterBudgets: planner.ClusterBudgets([]*policyv1.ClusterCapacityBudget{cb})}, c)
			if got := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | "); got != tc.want {
				t.Errorf("commands %q, want %q", got, tc.want)
			}
		})
	}
}

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

// Consolidation tries first the nodes running pods of a namespace over its budget: b goes
// before a, though a is cheaper to disrupt, while team-b runs over its hourly limit.
func TestConsolidationPrefersNamespacesOverBudget(t *testing.T) {
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	inTeamB := func(p *corev1.Pod) { p.Namespace = "team-b" }
	pinned := func(p *corev1.Pod) { p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"} }
	w := world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("web", "a", "500m", "1Gi"), pod("job-0", "b", "500m", "1Gi", inTeamB), pod("job-1", "b", "500m", "1Gi", inTeamB),
			pod("db", "c", "1", "2Gi", pinned)}}
	for name, tc := range map[string]struct {
		limit policyv1.Money
		want  string
	}{
		// team-b's two pods are a quarter of b: $0.05 an hour.
		"team-b over its limit: its node first":   {"0.01", "delete:b"},
		"team-b within its limit: cheapest first": {"1.00", "delete:a"},
	} {
		t.Run(name, func(t *testing.T) {
			limit := tc.limit
			budget := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Namespace: "team-b"},
				Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &limit}, Enforcement: policyv1.EnforcementDeny}}
			c := w.cluster()
			c.Check = NewPolicyCheck(&planner.Planner{Engine: engine, Now: now,
				Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{"team-b": budget}}, c)
			if got := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | "); got != tc.want {
				t.Errorf("commands %q, want %q", got, tc.want)
			}
		})
	}
}

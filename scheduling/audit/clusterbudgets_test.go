package audit

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// A ClusterCapacityBudget over team-a and team-b is judged in the ClusterReport against what
// they run together: its limit against their run-rate summed, its families against their
// nodes, each node once.
func TestAuditJudgesClusterBudgets(t *testing.T) {
	in := input(t, policyv1.EnforcementDryRun, nil)
	in.Namespaces["team-a"] = policies.Namespace{Name: "team-a", Labels: map[string]string{"team": "red"}}
	in.Namespaces["team-b"] = policies.Namespace{Name: "team-b", Labels: map[string]string{"team": "red"}}
	hourly := policyv1.Money("0.02")
	cb := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "red"}, Spec: policyv1.ClusterCapacityBudgetSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "red"}},
		CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Enforcement: policyv1.EnforcementDeny,
			InstanceFamilies: &policyv1.InstanceFamilies{Deny: []string{"m*"}}, Spot: &policyv1.SpotShare{MinPercent: ptr(int32(80))}}}}
	in.ClusterBudgets = []*policyv1.ClusterCapacityBudget{cb}
	rs := Evaluate(context.Background(), in)
	limit := find(rs, "", "ClusterCapacityBudget/red", "hourlyCost")
	if limit == nil || limit.Outcome != Fail || limit.Severity != High || limit.Properties["namespaces"] != "2" || !strings.Contains(limit.Message, "of its 2 namespaces") {
		t.Errorf("limit %+v", limit)
	}
	fam := find(rs, "", "ClusterCapacityBudget/red", "instanceFamilies")
	if fam == nil || fam.Outcome != Fail || fam.Properties["nodes"] != "1" || len(fam.Subjects) != 2 || fam.Subjects[1].Name != "n1" {
		t.Errorf("families %+v", fam)
	}
	// team-a's pod on the on-demand n1, team-b's on n1 and the Spot n2: 1 of 3 vCPU on Spot.
	if spot := find(rs, "", "ClusterCapacityBudget/red", "spot"); spot == nil || spot.Outcome != Fail || spot.Properties["spotPercent"] != "33.3" {
		t.Errorf("spot %+v", spot)
	}
	// Its limit raised past what they run, and the families allowed, both pass.
	hourly = "100"
	cb.Spec.InstanceFamilies = &policyv1.InstanceFamilies{Deny: []string{"x*"}}
	rs = Evaluate(context.Background(), in)
	if r := find(rs, "", "ClusterCapacityBudget/red", "hourlyCost"); r == nil || r.Outcome != Pass {
		t.Errorf("raised %+v", r)
	}
	if r := find(rs, "", "ClusterCapacityBudget/red", "instanceFamilies"); r == nil || r.Outcome != Pass {
		t.Errorf("families allowed %+v", r)
	}
}

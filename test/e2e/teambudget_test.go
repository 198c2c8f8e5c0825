package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/controllers/audit"
	"github.com/karpenter-policy/karpenter/test"
)

// A ClusterCapacityBudget over three namespaces, each with room of its own in its
// CapacityBudget: a burst in all three at once stops at the team's limit (what the NodePool's
// nodes cost never passes it by more than one node's price), the pods held stay gated, and
// the reports and the budget's status say so. A fourth namespace of the team, with no budget
// of its own, is gated by the team's.
func TestClusterCapacityBudgetStopsATeamBurstAtItsLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		}
	})
	const limit = 0.40
	team := test.Name("team")
	cb := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: team}, Spec: policyv1.ClusterCapacityBudgetSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": team}},
		CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: ptrMoney(fmt.Sprintf("%.2f", limit))},
			Enforcement: policyv1.EnforcementDeny}}}
	create(t, ctx, cb)
	var namespaces []string
	for _, p := range []string{"burst-a", "burst-b", "burst-c"} {
		ns := namespace(t, ctx, p, map[string]string{"team": team})
		create(t, ctx, budget(ns, "1.00", nil))
		namespaces = append(namespaces, ns)
	}
	// A fourth namespace of the team with no budget of its own: the team's budget gates it.
	bare := namespace(t, ctx, "burst-d", map[string]string{"team": team})
	// Gated from their first pod on: the gate's label on all four.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range append([]string{bare}, namespaces...) {
			ns := &corev1.Namespace{}
			if kube.Get(ctx, client.ObjectKey{Name: name}, ns) != nil || ns.Labels[policyv1.NamespaceGateLabel] != policyv1.NamespaceGateLabelValue {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal("the namespaces never got the CapacityBudget gate's label")
	}
	for _, ns := range namespaces {
		create(t, ctx, namespacedDeployment(ns, "burst", 30, np.Name, "500m", "1Gi"))
	}
	// The team's run-rate, sampled every second while the burst runs, against the dearest
	// NodeClaim launched for it.
	prices := map[string]*cloudprovider.InstanceType{}
	for _, it := range catalog.Embedded().ForProvider() {
		prices[it.Name] = it
	}
	var peak, maxNode float64
	var last float64
	var since time.Time
	cost := func(ctx context.Context) (float64, float64, error) {
		var claims karpv1.NodeClaimList
		if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
			return 0, 0, err
		}
		body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			return 0, 0, err
		}
		// The team's run-rate as its budget counts it: its pods' attributed cost on the nodes
		// and on the NodeClaims in flight (showback's, the same attribution).
		byNS := gauges(body, "karpenter_policy_namespace_cost_per_hour")["karpenter_policy_namespace_cost_per_hour"]
		total := 0.0
		for _, ns := range namespaces {
			total += byNS[ns]
		}
		// The dearest NodeClaim, by the KWOKNodeClass's catalog (the embedded one).
		dearest := 0.0
		for _, nc := range claims.Items {
			if it := prices[nc.Labels[corev1.LabelInstanceTypeStable]]; it != nil {
				for _, o := range it.Offerings {
					if o.CapacityType == karpv1.CapacityTypeOnDemand {
						dearest = max(dearest, o.Price)
					}
				}
			}
		}
		return total, dearest, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		total, dearest, err := cost(ctx)
		if err != nil {
			return false, nil
		}
		peak, maxNode = max(peak, total), max(maxNode, dearest)
		if total != last || since.IsZero() {
			last, since = total, time.Now()
		}
		return total > 0 && time.Since(since) > 20*time.Second, nil
	}); err != nil {
		t.Fatalf("the team's run-rate never settled: $%.4f/hour", last)
	}
	t.Logf("the team's run-rate is $%.4f/hour settled, $%.4f at the peak, against its limit $%.2f (dearest node $%.4f)", last, peak, limit, maxNode)
	if peak > limit+maxNode+0.005 {
		t.Errorf("the team's run-rate reached $%.4f/hour: past its limit $%.2f by more than a node ($%.4f)", peak, limit, maxNode)
	}
	if last < limit/2 {
		t.Errorf("the team's run-rate is only $%.4f/hour of its $%.2f: the budget should be used", last, limit)
	}
	running, held := 0, 0
	for _, ns := range namespaces {
		r, h := runningAndHeld(ctx, ns, "burst")
		running, held = running+len(r), held+len(h)
	}
	if running == 0 || held == 0 {
		t.Fatalf("%d pods running, %d held: a burst of 90 over a limit of $%.2f runs some and holds the rest", running, held, limit)
	}
	t.Logf("%d pods running, %d held by the gate", running, held)
	policy := "ClusterCapacityBudget/" + team
	// The pods held are in the reports of their namespaces, and the budget in the
	// ClusterReport; status counts the namespaces and the pods held.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		inReports := 0
		for _, ns := range namespaces {
			r := &reportsv1alpha1.Report{}
			if kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r) != nil {
				continue
			}
			for _, x := range r.Results {
				if x.Policy == policy && x.Properties["decision"] == "held" {
					inReports++
				}
			}
		}
		cr := &reportsv1alpha1.ClusterReport{}
		if kube.Get(ctx, client.ObjectKey{Name: audit.ReportName}, cr) != nil {
			return false, nil
		}
		limitResult := false
		for _, x := range cr.Results {
			limitResult = limitResult || (x.Policy == policy && x.Rule == policyv1.BudgetRuleHourlyCost && x.Properties["namespaces"] == "4")
		}
		got := &policyv1.ClusterCapacityBudget{}
		if kube.Get(ctx, client.ObjectKeyFromObject(cb), got) != nil {
			return false, nil
		}
		return inReports > 0 && limitResult && got.Status.NamespaceCount == 4 && got.Status.BlockedPods > 0 && got.Status.HourlyLimit == policyv1.Money("0.4000"), nil
	}); err != nil {
		got := &policyv1.ClusterCapacityBudget{}
		_ = kube.Get(ctx, client.ObjectKeyFromObject(cb), got)
		t.Fatalf("the reports or the status never showed the team's held pods: status %+v", got.Status)
	}
	got := &policyv1.ClusterCapacityBudget{}
	_ = kube.Get(ctx, client.ObjectKeyFromObject(cb), got)
	if !strings.Contains(fmt.Sprint(got.Status.Namespaces), namespaces[0]) {
		t.Errorf("status names %v", got.Status.Namespaces)
	}
	body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := gauges(body, "karpenter_cluster_budget_hourly_limit_dollars")["karpenter_cluster_budget_hourly_limit_dollars"][team]; !ok || l != limit {
		t.Errorf("karpenter_cluster_budget_hourly_limit_dollars{clustercapacitybudget=%q} is %v (present %v), want %v", team, l, ok, limit)
	}
}

func ptrMoney(s string) *policyv1.Money {
	m := policyv1.Money(s)
	return &m
}

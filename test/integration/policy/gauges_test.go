package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	budgetcontrollers "github.com/karpenter-policy/karpenter/controllers/budget"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
)

// The hourly-limit gauge goes with the limit: a budget whose limits are removed leaves no
// series behind.
func TestBudgetLimitGaugeGoesWithTheLimit(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC))
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cloud := kwok.New(testEnv.Client, clk, 1)
	cluster := state.NewCluster(testEnv.Client, clk)
	r := budgetcontrollers.NewBudgetStatus(testEnv.Client, cluster, state.NewAttribution(cluster, cloud, clk), engine, clk)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("gauge")}}
	hourly := policyv1.Money("2.00")
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"},
		Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Spot: &policyv1.SpotShare{MaxPercent: ptr(int32(50))}}}
	for _, o := range []client.Object{ns, b} {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
	cluster.Update(ns)
	reconcile1(t, r, client.ObjectKeyFromObject(b))
	if v := testutil.ToFloat64(metrics.BudgetHourlyLimit.WithLabelValues(ns.Name)); v != 2 {
		t.Fatalf("limit gauge %v", v)
	}
	patchBudgetSpec(t, ctx, b, func(b *policyv1.CapacityBudget) { b.Spec.Limits = nil })
	clk.Step(time.Minute)
	reconcile1(t, r, client.ObjectKeyFromObject(b))
	// DeleteLabelValues reports whether the series was there.
	if metrics.BudgetHourlyLimit.DeleteLabelValues(ns.Name) {
		t.Errorf("a budget without limits still has a karpenter_budget_hourly_limit_dollars series for %s", ns.Name)
	}
}

func patchBudgetSpec(t *testing.T, ctx context.Context, b *policyv1.CapacityBudget, change func(*policyv1.CapacityBudget)) {
	t.Helper()
	cur := &policyv1.CapacityBudget{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	change(cur)
	if err := testEnv.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// A CapacityPolicy's evaluation errors survive a restart: a new controller goes on from the
// count status holds.
func TestEvaluationErrorsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) { p.Name = test.Name("counted") })
	if err := testEnv.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), p) })
	p.Status.EvaluationErrors = 7
	if err := testEnv.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	r := policycontrollers.NewPolicyStatus(testEnv.Client, engine)
	reconcile1(t, r, client.ObjectKeyFromObject(p))
	got := &policyv1.CapacityPolicy{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.EvaluationErrors != 7 {
		t.Errorf("evaluation errors after a restart %d, want the 7 status held", got.Status.EvaluationErrors)
	}
}

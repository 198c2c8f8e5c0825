package policy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	budgetcontrollers "github.com/karpenter-policy/karpenter/controllers/budget"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
)

// An exception's status says Active and which namespaces it selects until expiresAt, then
// Expired with an Event; the budget status of an exempt namespace shows the raised limit
// while it applies and the budget's own after, by the same clock.
func TestCapacityExceptionStatusFollowsTheClock(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	recorder := events.NewFakeRecorder(10)
	r := policycontrollers.NewExceptionStatus(testEnv.Client, recorder, clk)

	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("shop"), Labels: map[string]string{"tier": "prod"}}}
	lab := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("lab"), Labels: map[string]string{"tier": "dev"}}}
	extra := policyv1.Money("0.50")
	ex := &policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: test.Name("launch")},
		Spec: policyv1.CapacityExceptionSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}},
			Exempt:          []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "*"}},
			ExtraHourlyCost: &extra, ExpiresAt: metav1.NewTime(start.Add(time.Hour)), Reason: "launch week", Ticket: "OPS-1"}}
	hourly := policyv1.Money("1.00")
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: shop.Name},
		Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}}}
	for _, o := range []client.Object{shop, lab, ex, b} {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
	get := func() *policyv1.CapacityException {
		out := &policyv1.CapacityException{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(ex), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ex)})
	if err != nil {
		t.Fatal(err)
	}
	st := get().Status
	if !meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeActive) || meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeExpired) ||
		!meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeReady) ||
		st.NamespaceCount != 1 || len(st.Namespaces) != 1 || st.Namespaces[0] != shop.Name || res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Fatalf("active: status %+v, requeue %v", st, res)
	}
	if v := testutil.ToFloat64(metrics.PolicyExceptions.WithLabelValues("active", "CapacityBudget", "*")); v < 1 {
		t.Errorf("karpenter_policy_exceptions{state=active} = %v", v)
	}

	// The budget's status, by the engine that holds the exception, with the same clock.
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	var list policyv1.CapacityExceptionList
	if err := testEnv.Client.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	engine.SetExceptions(list.Items)
	cloud := kwok.New(testEnv.Client, clk, 1)
	cluster := state.NewCluster(testEnv.Client, clk)
	cluster.Update(shop)
	budgets := budgetcontrollers.NewBudgetStatus(testEnv.Client, cluster, state.NewAttribution(cluster, cloud, clk), engine, clk)
	budget := func() policyv1.CapacityBudgetStatus {
		reconcile1(t, budgets, client.ObjectKeyFromObject(b))
		out := &policyv1.CapacityBudget{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(b), out); err != nil {
			t.Fatal(err)
		}
		return out.Status
	}
	if bs := budget(); bs.HourlyLimit != "1.5000" || !strings.Contains(meta.FindStatusCondition(bs.Conditions, policyv1.ConditionTypeBudgetExceeded).Message,
		"hourlyCost 1.00 + 0.50 by CapacityException "+ex.Name) {
		t.Errorf("budget under the exception: %+v", bs)
	}

	// At expiresAt: Expired, an Event, the gauge, and the budget's own limit.
	clk.SetTime(start.Add(time.Hour))
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ex)}); err != nil {
		t.Fatal(err)
	}
	st = get().Status
	if meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeActive) || !meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeExpired) {
		t.Errorf("expired: %+v", st.Conditions)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "Expired") || !strings.Contains(e, "namespaces "+shop.Name+" are held to their policies again") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event at expiry")
	}
	// Reconciling again writes no second Event.
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ex)}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("a second Event: %q", e)
	default:
	}
	if v := testutil.ToFloat64(metrics.PolicyExceptions.WithLabelValues("expired", "CapacityBudget", "*")); v < 1 {
		t.Errorf("karpenter_policy_exceptions{state=expired} = %v", v)
	}
	if bs := budget(); bs.HourlyLimit != "1.0000" {
		t.Errorf("budget after expiry: limit %s", bs.HourlyLimit)
	}
}

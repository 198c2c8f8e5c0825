package policy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	budgetcontrollers "github.com/karpenter-policy/karpenter/controllers/budget"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
)

// A budget's status forecasts the month at the current run-rate, and its alerts fire (the
// condition, an Event, the metric) when the run-rate reaches a threshold, and resolve when it
// no longer does.
func TestBudgetForecastAndAlerts(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC))
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	cloud := kwok.New(testEnv.Client, clk, 1)
	cluster := state.NewCluster(testEnv.Client, clk)
	r := budgetcontrollers.NewBudgetStatus(testEnv.Client, cluster, state.NewAttribution(cluster, cloud, clk), engine, clk).WithRecorder(recorder)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("alerts")}}
	class := test.KWOKNodeClass()
	np := test.NodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = class.Name })
	// A $0.096/hour on-demand m5.large with a pod of the namespace on half of it: $0.048/hour.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: test.Name("node"), Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "m5.large", karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "us-east-1a", karpv1.NodePoolLabelKey: np.Name}}}
	for _, o := range []client.Object{ns, class, np, node} {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web-0"}, Spec: corev1.PodSpec{NodeName: node.Name,
		Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	for _, o := range []client.Object{ns, np, node, pod} {
		cluster.Update(o)
	}
	hourly := policyv1.Money("0.06")
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}, Spec: policyv1.CapacityBudgetSpec{
		Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Alerts: []policyv1.BudgetAlert{{Percent: 50}, {Percent: 75}, {Percent: 100}}}}
	if err := testEnv.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), b) })
	get := func() policyv1.CapacityBudgetStatus {
		reconcile1(t, r, client.ObjectKeyFromObject(b))
		out := &policyv1.CapacityBudget{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(b), out); err != nil {
			t.Fatal(err)
		}
		return out.Status
	}
	st := get()
	// $0.048 of $0.06 is 80%: the 75% threshold. Forecast: 348 hours left at $0.048.
	c := meta.FindStatusCondition(st.Conditions, policyv1.ConditionTypeAlertFiring)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Above75Percent" || !strings.Contains(c.Message, "80.0% of the hourly limit") {
		t.Errorf("AlertFiring %+v", c)
	}
	if st.ForecastMonthCost != "16.7040" || st.ForecastPercent != "38.7" {
		t.Errorf("forecast %s (%s%%), want 0.048 x 348 = 16.7040, 38.7%% of 0.06 x 720", st.ForecastMonthCost, st.ForecastPercent)
	}
	if e := <-recorder.Events; !strings.Contains(e, "AlertFiring") {
		t.Errorf("event %q", e)
	}
	if v := testutil.ToFloat64(metrics.BudgetAlertFiring.WithLabelValues(ns.Name, "75")); v != 1 {
		t.Errorf("alert 75 metric %v", v)
	}
	if v := testutil.ToFloat64(metrics.BudgetAlertFiring.WithLabelValues(ns.Name, "100")); v != 0 {
		t.Errorf("alert 100 metric %v", v)
	}
	// A higher limit: the run-rate is 40%, under every threshold; the alert resolves.
	patchBudgetSpec(t, ctx, b, func(b *policyv1.CapacityBudget) { h := policyv1.Money("0.12"); b.Spec.Limits.HourlyCost = &h })
	st = get()
	if meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeAlertFiring) {
		t.Errorf("still firing: %+v", st.Conditions)
	}
	if e := <-recorder.Events; !strings.Contains(e, "AlertResolved") {
		t.Errorf("event %q", e)
	}
}

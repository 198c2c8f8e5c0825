// Package policy_test drives the policy status controllers against a real API server: what
// a CapacityPolicy's and a CapacityBudget's status say, and how spend accrues, with a fake
// clock.
package policy_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	budgetcontrollers "github.com/karpenter-policy/karpenter/controllers/budget"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/env"
	"github.com/karpenter-policy/karpenter/webhooks"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }

func reconcile1(t *testing.T, r reconcile.Reconciler, key client.ObjectKey) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
}

func TestCapacityPolicyStatus(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	r := policycontrollers.NewPolicyStatus(testEnv.Client, engine)
	// No webhook here: what admission would refuse reaches the controller, as it does when
	// the webhook was away.
	broken := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "a.rego", Rego: "package karpenter.provisioning\n\ndeny contains x if {\n\tx := \n}\n"}}
	})
	failing := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Spec.Modules = []policyv1.PolicyModule{
			{Name: "gate.rego", Rego: "package karpenter.launch\n\ndeny contains \"big\" if input.nodeClaim.pricePerHour > 10\n"},
			{Name: "gate_test.rego", Rego: "package karpenter.launch_test\n\nimport data.karpenter.launch\n\n" +
				"test_denies_big if launch.deny[\"big\"] with input as {\"nodeClaim\": {\"pricePerHour\": 11}}\n" +
				"test_wrong if count(launch.deny) == 0 with input as {\"nodeClaim\": {\"pricePerHour\": 11}}\n"},
		}
	})
	for _, p := range []*policyv1.CapacityPolicy{broken, failing} {
		if err := testEnv.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), p) })
		reconcile1(t, r, client.ObjectKeyFromObject(p))
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
	}
	st := broken.Status
	if len(st.CompileErrors) != 1 || st.CompileErrors[0].Module != "a.rego" || st.CompileErrors[0].Line != 5 || st.CompileErrors[0].Column != 1 {
		t.Errorf("compile errors %+v", st.CompileErrors)
	}
	if c := meta.FindStatusCondition(st.Conditions, policyv1.ConditionTypeCompiled); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "a.rego:5:1") {
		t.Errorf("Compiled %+v", c)
	}
	if meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeReady) || st.ObservedGeneration != broken.Generation {
		t.Errorf("a policy that does not compile is not Ready: %+v", st)
	}
	st = failing.Status
	if st.Tests == nil || st.Tests.Passed != 1 || st.Tests.Failed != 1 || st.Tests.Failures[0].Name != "data.karpenter.launch_test.test_wrong" {
		t.Errorf("tests %+v", st.Tests)
	}
	if len(st.DecisionPoints) != 1 || st.DecisionPoints[0] != policyv1.DecisionPointLaunch {
		t.Errorf("decision points %v", st.DecisionPoints)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeCompiled) || meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeTestsPassed) ||
		meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeReady) {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

func TestCapacityBudgetStatusAccruesSpend(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	cloud := kwok.New(testEnv.Client, clk, 1)
	cluster := state.NewCluster(testEnv.Client, clk)
	r := budgetcontrollers.NewBudgetStatus(testEnv.Client, cluster, state.NewAttribution(cluster, cloud, clk), engine, clk)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("team")}}
	class := test.KWOKNodeClass()
	np := test.NodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = class.Name })
	// A running m5.large on-demand node ($0.096/hour in the embedded catalog) with one pod of
	// the namespace requesting half of it.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: test.Name("node"), Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "m5.large", karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "us-east-1a",
		karpv1.NodePoolLabelKey: np.Name}}}
	for _, o := range []client.Object{ns, class, np, node} {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}
	node.Status.Capacity = node.Status.Allocatable
	if err := testEnv.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web-0"}, Spec: corev1.PodSpec{NodeName: node.Name,
		Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	if err := testEnv.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The cluster model holds them, as its informers would give them.
	for _, o := range []client.Object{ns, np, node, pod} {
		cluster.Update(o)
	}
	b := test.CapacityBudget(func(b *policyv1.CapacityBudget) {
		b.Namespace = ns.Name
		hourly := policyv1.Money("0.04")
		b.Spec.Limits = &policyv1.BudgetLimits{HourlyCost: &hourly}
		b.Spec.Spot = &policyv1.SpotShare{MinPercent: ptr(int32(50))}
	})
	if err := testEnv.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	get := func() *policyv1.CapacityBudget {
		out := &policyv1.CapacityBudget{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(b), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reconcile1(t, r, client.ObjectKeyFromObject(b))
	st := get().Status
	// 0.096 * (1/2 + 4/8) / 2 = 0.048
	if st.HourlyCost != "0.0480" || st.HourlyLimit != "0.0400" || st.RemainingHourlyCost != "0.0000" || st.SpotPercent != "0.0" || st.MonthToDateCost != "0.0000" {
		t.Fatalf("status %+v", st)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeBudgetExceeded) || !meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeSpotShareOutOfRange) ||
		!meta.IsStatusConditionTrue(st.Conditions, policyv1.ConditionTypeReady) {
		t.Errorf("conditions %+v", st.Conditions)
	}
	// Two hours later the month to date has grown by two hours at $0.048.
	clk.Step(2 * time.Hour)
	reconcile1(t, r, client.ObjectKeyFromObject(b))
	st = get().Status
	if spent, _ := strconv.ParseFloat(string(st.MonthToDateCost), 64); spent < 0.0959 || spent > 0.0961 {
		t.Errorf("month to date %s after 2h at 0.048", st.MonthToDateCost)
	}
	// A restart loses nothing: a new controller picks up from status.
	r2 := budgetcontrollers.NewBudgetStatus(testEnv.Client, cluster, state.NewAttribution(cluster, cloud, clk), engine, clk)
	clk.Step(time.Hour)
	reconcile1(t, r2, client.ObjectKeyFromObject(b))
	if spent, _ := strconv.ParseFloat(string(get().Status.MonthToDateCost), 64); spent < 0.1439 || spent > 0.1441 {
		t.Errorf("month to date %s after 3h", get().Status.MonthToDateCost)
	}
	// A new month starts over.
	clk.SetTime(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
	reconcile1(t, r2, client.ObjectKeyFromObject(b))
	if spent, _ := strconv.ParseFloat(string(get().Status.MonthToDateCost), 64); spent < 0.0479 || spent > 0.0481 {
		t.Errorf("month to date %s one hour into December", get().Status.MonthToDateCost)
	}
}

func ptr[T any](v T) *T { return &v }

// The admission review: a CapacityPolicy at karpenter.admission refuses a NodePool without a
// cpu limit and warns on one with a large limit; the review adds the NodePool's $/hour impact.
func TestAdmissionReview(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC))
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	rego := `package karpenter.admission

deny contains msg if {
	input.kind == "NodePool"
	not input.object.spec.limits.cpu
	msg := sprintf("NodePool %s needs a cpu limit", [input.object.metadata.name])
}

warn contains msg if {
	input.kind == "NodePool"
	units.parse(input.object.spec.limits.cpu) > data.parameters.maxCPU
	msg := sprintf("NodePool %s may grow past %d vCPU", [input.object.metadata.name, data.parameters.maxCPU])
}
`
	if probs := engine.SetPolicies([]policyv1.CapacityPolicy{*test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name = "nodepool-limits"
		p.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"maxCPU": 1000}`)}
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "limits.rego", Rego: rego}}
	})}); len(probs) > 0 {
		t.Fatal(probs)
	}
	cloud := kwok.New(testEnv.Client, clk, 1)
	cluster := state.NewCluster(testEnv.Client, clk)
	review := webhooks.NewClusterReview(admission.New(engine, &webhooks.ClusterFacts{Client: testEnv.Client, Cloud: cloud,
		Attribution: state.NewAttribution(cluster, cloud, clk)}, clk.Now))
	class := test.KWOKNodeClass()
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), class) })
	np := test.NodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = class.Name })
	_, denials := review.Review(ctx, "CREATE", np, nil)
	if len(denials) != 1 || denials[0] != "CapacityPolicy nodepool-limits: NodePool "+np.Name+" needs a cpu limit" {
		t.Errorf("denials %v", denials)
	}
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("2000")}
	warnings, denials := review.Review(ctx, "UPDATE", np, nil)
	if len(denials) != 0 || len(warnings) != 2 || warnings[0] != "NodePool "+np.Name+" may grow past 1000 vCPU" ||
		!strings.HasPrefix(warnings[1], "NodePool "+np.Name+": its cpu limit allows nodes costing $") {
		t.Errorf("warnings %q, denials %v", warnings, denials)
	}
}

package validation

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

var v = New()

func nodePool(f func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5"}}},
	}}}}
	if f != nil {
		f(np)
	}
	return np
}

// expect asserts errs has exactly the wanted fields (in any order), each with its message.
func expect(t *testing.T, errs field.ErrorList, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] += e.Error()
	}
	if len(got) != len(want) {
		t.Fatalf("got errors %v, want fields %v", errs, want)
	}
	for f, msg := range want {
		if !strings.Contains(got[f], msg) {
			t.Errorf("field %s: got %q, want it to contain %q", f, got[f], msg)
		}
	}
}

func TestNodePool(t *testing.T) {
	for name, tc := range map[string]struct {
		np   *karpv1.NodePool
		want map[string]string
	}{
		"valid": {np: nodePool(nil), want: map[string]string{}},
		"descriptor schedule is fine": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("@daily"), Duration: &metav1.Duration{Duration: 3600e9}}}
		}), want: map[string]string{}},
		"schedule with a time zone": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("CRON_TZ=Europe/Paris 0 9 * * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
		}), want: map[string]string{"spec.disruption.budgets[0].schedule": "time zones are not supported"}},
		"schedule without duration": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("@daily")}}
		}), want: map[string]string{"spec.disruption.budgets[0]": "set together"}},
		"zero duration": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("@daily"), Duration: &metav1.Duration{}}}
		}), want: map[string]string{"spec.disruption.budgets[0].duration": "greater than zero"}},
		"restricted requirement domain": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Key = "foo.karpenter.k8s.aws/thing"
		}), want: map[string]string{"spec.template.spec.requirements[0].key": `label domain "karpenter.k8s.aws" is restricted`}},
		"exception domain is allowed": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Key = "node.kubernetes.io/role"
		}), want: map[string]string{}},
		"gt needs an integer": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0] = karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceCPU, Operator: karpv1.NodeSelectorOpGte, Values: []string{"-1"}}
		}), want: map[string]string{"spec.template.spec.requirements[0].values": "non-negative integer"}},
		"minValues above distinct values": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{"m5", "m5", "c5"}
			np.Spec.Template.Spec.Requirements[0].MinValues = ptr.To(3)
		}), want: map[string]string{"spec.template.spec.requirements[0].minValues": "2 distinct values"}},
		"nodepool label": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Labels = map[string]string{karpv1.NodePoolLabelKey: "x"}
		}), want: map[string]string{"spec.template.metadata.labels[karpenter.sh/nodepool]": "restricted"}},
		"negative limit": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("-1")}
		}), want: map[string]string{"spec.limits[cpu]": "must not be negative"}},
		// Accepted, as upstream does: the NodePool's NodeClassReady condition reports a kind the
		// cloud provider does not serve.
		"a node class kind this build does not launch": {np: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef.Kind = "AzureNodeClass"
		}), want: map[string]string{}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, v.NodePool(tc.np), tc.want) })
	}
}

func TestCapacityBudget(t *testing.T) {
	budget := func(f func(*policyv1.CapacityBudget)) *policyv1.CapacityBudget {
		b := &policyv1.CapacityBudget{Spec: policyv1.CapacityBudgetSpec{
			Limits:           &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("13.00")},
			Spot:             &policyv1.SpotShare{MinPercent: ptr.To[int32](60), MaxPercent: ptr.To[int32](90)},
			InstanceFamilies: &policyv1.InstanceFamilies{Allow: []string{"m*", "c?"}, Deny: []string{"*metal*"}},
		}}
		if f != nil {
			f(b)
		}
		return b
	}
	for name, tc := range map[string]struct {
		b    *policyv1.CapacityBudget
		want map[string]string
	}{
		"valid":          {b: budget(nil), want: map[string]string{}},
		"min above max":  {b: budget(func(b *policyv1.CapacityBudget) { b.Spec.Spot.MinPercent = ptr.To[int32](95) }), want: map[string]string{"spec.spot.minPercent": "must not exceed maxPercent (90)"}},
		"zero money":     {b: budget(func(b *policyv1.CapacityBudget) { b.Spec.Limits.HourlyCost = ptr.To[policyv1.Money]("0.000") }), want: map[string]string{"spec.limits.hourlyCost": "greater than zero"}},
		"exponent money": {b: budget(func(b *policyv1.CapacityBudget) { b.Spec.Limits.MonthlyCost = ptr.To[policyv1.Money]("1e3") }), want: map[string]string{"spec.limits.monthlyCost": "decimal amount"}},
		"bad glob":       {b: budget(func(b *policyv1.CapacityBudget) { b.Spec.InstanceFamilies.Allow = []string{"m[5"} }), want: map[string]string{"spec.instanceFamilies.allow[0]": "not a valid glob"}},
		"schedule overrides": {b: budget(func(b *policyv1.CapacityBudget) {
			b.Spec.Schedules = []policyv1.BudgetSchedule{{Schedule: "0 18 * * mon-fri", Duration: metav1.Duration{Duration: 14 * 3600e9},
				Spot: &policyv1.SpotShare{MinPercent: ptr.To[int32](50), MaxPercent: ptr.To[int32](40)}}}
		}), want: map[string]string{"spec.schedules[0].spot.minPercent": "must not exceed maxPercent (40)"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, v.CapacityBudget(tc.b), tc.want) })
	}
}

func TestCapacityPolicy(t *testing.T) {
	policy := func(params string, modules ...policyv1.PolicyModule) *policyv1.CapacityPolicy {
		p := &policyv1.CapacityPolicy{Spec: policyv1.CapacityPolicySpec{Modules: modules}}
		if params != "" {
			p.Spec.Parameters = &runtime.RawExtension{Raw: []byte(params)}
		}
		return p
	}
	rule := policyv1.PolicyModule{Name: "deny.rego", Rego: "package karpenter.launch\n\ndeny contains msg if {\n\tsome f in input.families\n\tsome p in data.parameters.denied\n\tglob.match(p, [], f)\n\tmsg := f\n}\n"}
	passing := policyv1.PolicyModule{Name: "deny_test.rego", Rego: "package karpenter.launch_test\n\nimport data.karpenter.launch\n\ntest_denied if {\n\tlaunch.deny == {\"p4d\"} with input as {\"families\": [\"p4d\", \"m5\"]}\n}\n"}
	for name, tc := range map[string]struct {
		p    *policyv1.CapacityPolicy
		want map[string]string
	}{
		"compiles and its test passes with the parameters": {p: policy(`{"denied":["p*"]}`, rule, passing), want: map[string]string{}},
		"the same test fails without them": {p: policy(`{"denied":[]}`, rule, passing),
			want: map[string]string{"spec.modules[1].rego": "test data.karpenter.launch_test.test_denied failed"}},
		"parameters not an object": {p: policy(`[1]`, rule), want: map[string]string{"spec.parameters": "JSON object"}},
		"unsafe variable names line and column": {p: policy("", policyv1.PolicyModule{Name: "x.rego", Rego: "package karpenter.admission\n\ndeny contains msg if {\n\tmsg := y\n}\n"}),
			want: map[string]string{"spec.modules[0].rego": "x.rego:4:"}},
		"http.send is refused, named, where it is": {p: policy("", policyv1.PolicyModule{Name: "fetch.rego",
			Rego: "package karpenter.launch\n\ndeny contains msg if {\n\tr := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:9/\"})\n\tmsg := r.body\n}\n"}),
			want: map[string]string{"spec.modules[0].rego": "fetch.rego:4:7: builtin http.send is not allowed"}},
		"a test that calls time.now_ns is refused too": {p: policy(`{"denied":["p*"]}`, rule, policyv1.PolicyModule{Name: "clock_test.rego",
			Rego: "package karpenter.launch_test\n\ntest_clock if time.now_ns() > 0\n"}),
			want: map[string]string{"spec.modules[1].rego": "clock_test.rego:3:15: builtin time.now_ns is not allowed"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, v.CapacityPolicy(context.Background(), tc.p), tc.want) })
	}
}

// Tests that run past the admission budget refuse the policy with that reason, once.
func TestCapacityPolicyTestBudget(t *testing.T) {
	defer func(b time.Duration) { TestBudget = b }(TestBudget)
	TestBudget = 50 * time.Millisecond
	slow := policyv1.PolicyModule{Name: "slow_test.rego", Rego: "package karpenter.launch_test\n\ntest_slow if {\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j == -1\n}\n"}
	rule := policyv1.PolicyModule{Name: "r.rego", Rego: "package karpenter.launch\n\ndeny contains 1 if false\n"}
	p := &policyv1.CapacityPolicy{Spec: policyv1.CapacityPolicySpec{Modules: []policyv1.PolicyModule{rule, slow}}}
	expect(t, v.CapacityPolicy(context.Background(), p), map[string]string{"spec.modules": "did not finish within 50ms"})
}

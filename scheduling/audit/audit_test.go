package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/test"
)

var now = time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)

// noFamilyM denies instance family m* at provisioning.
const noFamilyM = `package karpenter.provisioning

deny_instance_types contains {"name": it.name, "msg": sprintf("family %s is refused", [it.family]), "rule": "no-m"} if {
	some it in input.instanceTypes
	startswith(it.family, "m")
}
`

func kubeNode(name, pool, typ, ct string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: typ,
		karpv1.CapacityTypeLabelKey: ct, corev1.LabelTopologyZone: "us-east-1a", karpv1.NodePoolLabelKey: pool}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func pod(ns, name, on string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: on,
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func input(t *testing.T, mode policyv1.EnforcementAction, budget *policyv1.CapacityBudget) Input {
	t.Helper()
	np := test.NodePool(func(np *karpv1.NodePool) { np.Name = "general" })
	objs := &snapshot.Objects{NodePools: []*karpv1.NodePool{np},
		Nodes: []*corev1.Node{kubeNode("n1", "general", "m5.large", "on-demand"), kubeNode("n2", "general", "c5.large", "spot")},
		Pods:  []*corev1.Pod{pod("team-a", "a-0", "n1"), pod("team-b", "b-0", "n1"), pod("team-b", "b-1", "n2")}}
	types := catalog.Embedded().ForProvider()
	snap := snapshot.Build(objs, snapshot.Env{Now: now, InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return types, nil }})
	e, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Spec.Enforcement, p.Spec.NamespaceSelector = "no-m", mode, nil
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "no-m.rego", Rego: noFamilyM}}
	})
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{*p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	in := Input{Snapshot: snap, Engine: e, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{},
		Policies: []*policyv1.CapacityPolicy{p}, NodePools: []*karpv1.NodePool{np}, Now: now}
	if budget != nil {
		in.Budgets[budget.Namespace] = budget
	}
	return in
}

func find(rs []Result, ns, policy, rule string) *Result {
	for i := range rs {
		if rs[i].Namespace == ns && rs[i].Policy == policy && rs[i].Rule == rule {
			return &rs[i]
		}
	}
	return nil
}

// A DryRun policy that denies family m fails, in each namespace that runs on an m node, with
// that node as subject, as it would enforced; the cluster's report lists the NodePool. The
// namespaces' other results pass.
func TestAuditShadowsADryRunPolicy(t *testing.T) {
	for _, mode := range []policyv1.EnforcementAction{policyv1.EnforcementDryRun, policyv1.EnforcementDeny} {
		rs := Evaluate(context.Background(), input(t, mode, nil))
		for _, ns := range []string{"team-a", "team-b"} {
			r := find(rs, ns, "CapacityPolicy/no-m", "no-m")
			if r == nil || r.Outcome != Fail || !strings.Contains(r.Message, "family m5 is refused") || !strings.Contains(r.Message, "n1 (m5.large, on-demand") ||
				r.Subjects[0].Name != "n1" || r.Properties["enforcement"] != string(mode) {
				t.Errorf("%s, %s: %+v", mode, ns, r)
			}
		}
		c := find(rs, "", "CapacityPolicy/no-m", "no-m")
		if c == nil || c.Outcome != Fail || c.Subjects[0].Kind != "NodePool" || c.Subjects[0].Name != "general" || !strings.Contains(c.Message, "for namespaces team-a, team-b") {
			t.Errorf("%s, cluster: %+v", mode, c)
		}
	}
	if r := find(Evaluate(context.Background(), input(t, policyv1.EnforcementWarn, nil)), "team-a", "CapacityPolicy/no-m", "no-m"); r == nil || r.Outcome != Warn {
		t.Errorf("Warn: %+v", r)
	}
}

// A budget's limit, Spot share and families against what runs.
func TestAuditJudgesBudgets(t *testing.T) {
	hourly := policyv1.Money("0.01")
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "default"}, Spec: policyv1.CapacityBudgetSpec{
		Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Spot: &policyv1.SpotShare{MinPercent: ptr(int32(80))},
		InstanceFamilies: &policyv1.InstanceFamilies{Allow: []string{"c*"}}}}
	rs := Evaluate(context.Background(), input(t, policyv1.EnforcementDryRun, b))
	limit := find(rs, "team-b", "CapacityBudget/team-b/default", "hourlyCost")
	if limit == nil || limit.Outcome != Fail || limit.Severity != High || limit.Properties["hourlyLimit"] != "0.0100" || !strings.Contains(limit.Message, "over the limit 0.01") {
		t.Errorf("limit %+v", limit)
	}
	spot := find(rs, "team-b", "CapacityBudget/team-b/default", "spot")
	if spot == nil || spot.Outcome != Fail || spot.Properties["spotPercent"] != "50.0" {
		t.Errorf("spot %+v", spot)
	}
	fam := find(rs, "team-b", "CapacityBudget/team-b/default", "instanceFamilies")
	if fam == nil || fam.Outcome != Fail || fam.Subjects[0].Name != "n1" || !strings.Contains(fam.Message, "is not in instanceFamilies.allow") {
		t.Errorf("families %+v", fam)
	}
	// Raised by an exception, the limit passes; lifted, it is skipped with the exception named.
	extra := policyv1.Money("5.00")
	in := input(t, policyv1.EnforcementDryRun, b)
	in.Engine.SetExceptions([]policyv1.CapacityException{{ObjectMeta: metav1.ObjectMeta{Name: "launch"}, Spec: policyv1.CapacityExceptionSpec{
		Namespaces: []string{"team-b"}, Exempt: []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "*", Rules: []string{policyv1.BudgetRuleHourlyCost}}},
		ExtraHourlyCost: &extra, ExpiresAt: metav1.NewTime(now.Add(time.Hour)), Reason: "r"}}})
	if r := find(Evaluate(context.Background(), in), "team-b", "CapacityBudget/team-b/default", "hourlyCost"); r == nil || r.Outcome != Pass || r.Properties["hourlyLimit"] != "5.0100" {
		t.Errorf("raised %+v", r)
	}
}

// Admission rules judge NodePools as they are now.
func TestAuditRunsAdmissionRulesOnNodePools(t *testing.T) {
	in := input(t, policyv1.EnforcementDeny, nil)
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Spec.NamespaceSelector = "limits", nil
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "limits.rego", Rego: "package karpenter.admission\n\ndeny contains \"NodePools need a cpu limit\" if {\n\tinput.kind == \"NodePool\"\n\tnot input.object.spec.limits.cpu\n}\n"}}
	})
	if probs := in.Engine.SetPolicies([]policyv1.CapacityPolicy{*p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	r := find(Evaluate(context.Background(), in), "", "CapacityPolicy/limits", "karpenter.admission")
	if r == nil || r.Outcome != Fail || r.Subjects[0].Name != "general" || r.Message != "NodePools need a cpu limit" {
		t.Errorf("admission %+v", r)
	}
}

func ptr[T any](v T) *T { return &v }

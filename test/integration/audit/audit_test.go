// Package audit_test runs the audit controller against a real API server: the OpenReports it
// writes pass the OpenReports CRD's schema, a new leader writes the same reports from the
// cluster and the last one's reports, and CapacityPolicy status counts its results.
package audit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/audit"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	schedaudit "github.com/karpenter-policy/karpenter/scheduling/audit"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }

const noFamilyM = `package karpenter.provisioning

deny_instance_types contains {"name": it.name, "msg": sprintf("family %s is refused", [it.family]), "rule": "no-m"} if {
	some it in input.instanceTypes
	startswith(it.family, "m")
}
`

func create(t *testing.T, ctx context.Context, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := testEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), o) })
	}
}

func TestAuditWritesReportsAndANewLeaderTheSame(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC))
	class := test.KWOKNodeClass()
	np := test.NodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = class.Name })
	a := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("team-a")}}
	b := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name("team-b")}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: test.Name("node"), Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large",
		karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "us-east-1a", karpv1.NodePoolLabelKey: np.Name}}}
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Spec.Enforcement, p.Spec.NamespaceSelector = test.Name("no-m"), policyv1.EnforcementDryRun, nil
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "no-m.rego", Rego: noFamilyM}}
	})
	create(t, ctx, class, np, a, b, node, p)
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := testEnv.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, ns := range []string{a.Name, b.Name} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"}, Spec: corev1.PodSpec{NodeName: node.Name,
			Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		create(t, ctx, pod)
		pods = append(pods, pod)
	}
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if probs := engine.SetPolicies([]policyv1.CapacityPolicy{*p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	leader := func() (*audit.Controller, *state.Cluster) {
		cluster := state.NewCluster(testEnv.Client, clk)
		for _, o := range []client.Object{a, b, np, node, pods[0], pods[1]} {
			cluster.Update(o)
		}
		return audit.NewController(testEnv.Client, cluster, kwok.New(testEnv.Client, clk, 1), engine, clk, time.Minute), cluster
	}
	first, cluster := leader()
	// A decision the provisioner took: pods held in team-b.
	cluster.PolicyDecisions().Record(schedaudit.Result{Namespace: b.Name, Policy: "CapacityBudget/" + b.Name + "/default", Rule: "hourlyCost",
		Outcome: schedaudit.Fail, Severity: schedaudit.High, Subjects: []schedaudit.Subject{{APIVersion: "v1", Kind: "Namespace", Name: b.Name}},
		Message: "3 pods held back: over the limit", Properties: map[string]string{"decision": "held", "pods": "3"}}, clk.Now())
	if err := first.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	read := func() (map[string]*reportsv1alpha1.Report, *reportsv1alpha1.ClusterReport) {
		out := map[string]*reportsv1alpha1.Report{}
		for _, ns := range []string{a.Name, b.Name} {
			r := &reportsv1alpha1.Report{}
			if err := testEnv.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r); err != nil {
				t.Fatalf("%s's report: %v", ns, err)
			}
			out[ns] = r
		}
		cr := &reportsv1alpha1.ClusterReport{}
		if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: audit.ReportName}, cr); err != nil {
			t.Fatal(err)
		}
		return out, cr
	}
	reports, cr := read()
	for ns, r := range reports {
		found := false
		for _, x := range r.Results {
			if x.Policy == "CapacityPolicy/"+p.Name && x.Result == "fail" && x.Properties["enforcement"] == "DryRun" && len(x.Subjects) > 0 && x.Subjects[0].Name == node.Name {
				found = true
			}
		}
		if !found || r.Summary.Fail == 0 || r.Source != audit.Source || r.Scope == nil || r.Scope.Name != ns {
			t.Errorf("%s: the DryRun policy's shadow result with the node is missing: %+v", ns, r.Results)
		}
	}
	held := false
	for _, x := range reports[b.Name].Results {
		held = held || (x.Properties["decision"] == "held" && strings.Contains(x.Description, "3 pods held back"))
	}
	if !held {
		t.Errorf("the held decision is missing from %s's report: %+v", b.Name, reports[b.Name].Results)
	}
	listed := false
	for _, x := range cr.Results {
		listed = listed || (x.Policy == "CapacityPolicy/"+p.Name && len(x.Subjects) > 0 && x.Subjects[0].Kind == "NodePool" && x.Subjects[0].Name == np.Name)
	}
	if !listed {
		t.Errorf("the cluster report does not list the NodePool: %+v", cr.Results)
	}

	// A new leader, with nothing in memory but the cluster, writes the same reports: the
	// decision restored from them.
	clk.Step(30 * time.Second)
	second, _ := leader()
	if err := second.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	again, cr2 := read()
	for ns := range reports {
		if len(again[ns].Results) != len(reports[ns].Results) || again[ns].ResourceVersion != reports[ns].ResourceVersion {
			t.Errorf("%s: the new leader's report differs:\n%+v\n%+v", ns, reports[ns].Results, again[ns].Results)
		}
	}
	if cr2.ResourceVersion != cr.ResourceVersion {
		t.Errorf("the new leader rewrote the cluster report:\n%+v\n%+v", cr.Results, cr2.Results)
	}

	// CapacityPolicy status counts the policy's results in the reports: two namespaces and
	// the NodePool, in DryRun.
	status := policycontrollers.NewPolicyStatus(testEnv.Client, engine)
	if _, err := status.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	got := &policyv1.CapacityPolicy{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if v := got.Status.Violations; v == nil || v.DryRun != 3 || v.Denied != 0 {
		t.Errorf("violations %+v, want 3 DryRun (two namespaces and the NodePool)", v)
	}
}

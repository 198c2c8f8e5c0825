package e2e

import (
	"context"
	"slices"
	"sort"
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
	"github.com/karpenter-policy/karpenter/controllers/audit"
	"github.com/karpenter-policy/karpenter/test"
)

// substance is a report's results about a policy as a reader takes them: outcome, rule and
// subjects, without timestamps or the enforcement that produced them.
func substance(rs []reportsv1alpha1.ReportResult, policy string) []string {
	var out []string
	for _, r := range rs {
		if r.Policy != policy {
			continue
		}
		var subjects []string
		for _, s := range r.Subjects {
			subjects = append(subjects, s.Kind+"/"+s.Name)
		}
		sort.Strings(subjects)
		out = append(out, string(r.Result)+" "+r.Rule+" "+strings.Join(subjects, ","))
	}
	sort.Strings(out)
	return out
}

// Pods of two namespaces on nodes of family m; a CapacityPolicy in DryRun that refuses family
// m: the audit writes a fail result naming the policy and the nodes in each namespace's
// Report, and the ClusterReport lists the NodePool. Switched to Deny, the policy leaves the
// running pods alone and the reports say the same.
func TestAuditReportsWhatADryRunPolicyWouldRefuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			{Key: karpv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}},
		}
	})
	marker := test.Name("audited")
	a := namespace(t, ctx, "audit-a", map[string]string{"audit-test": marker})
	b := namespace(t, ctx, "audit-b", map[string]string{"audit-test": marker})
	create(t, ctx, namespacedDeployment(a, "web", 2, np.Name, "500m", "1Gi"), namespacedDeployment(b, "web", 2, np.Name, "500m", "1Gi"))
	var running []string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		running = nil
		for _, ns := range []string{a, b} {
			for _, p := range podsIn(ctx, ns, "web") {
				if p.Status.Phase == corev1.PodRunning {
					running = append(running, ns+"/"+p.Name)
				}
			}
		}
		return len(running) == 4, nil
	}); err != nil {
		t.Fatalf("the pods never ran on family m: %v", running)
	}
	sort.Strings(running)
	policy := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Generation = test.Name("no-m"), 0
		p.Spec.Enforcement = policyv1.EnforcementDryRun
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"audit-test": marker}}
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "no-m.rego", Rego: `package karpenter.provisioning

deny_instance_types contains {"name": it.name, "msg": sprintf("family %s is refused", [it.family]), "rule": "no-m"} if {
	some it in input.instanceTypes
	startswith(it.family, "m")
}
`}}
	})
	start := time.Now()
	create(t, ctx, policy)
	name := "CapacityPolicy/" + policy.Name
	reports := func(ctx context.Context) (map[string][]string, []string, bool) {
		out := map[string][]string{}
		for _, ns := range []string{a, b} {
			r := &reportsv1alpha1.Report{}
			if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r); err != nil {
				return nil, nil, false
			}
			out[ns] = substance(r.Results, name)
		}
		cr := &reportsv1alpha1.ClusterReport{}
		if err := kube.Get(ctx, client.ObjectKey{Name: audit.ReportName}, cr); err != nil {
			return nil, nil, false
		}
		return out, substance(cr.Results, name), true
	}
	var before map[string][]string
	var cluster []string
	// Within two audit intervals (1m each): on change it runs within seconds.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ok bool
		if before, cluster, ok = reports(ctx); !ok {
			return false, nil
		}
		for _, ns := range []string{a, b} {
			if len(before[ns]) == 0 || !strings.HasPrefix(before[ns][0], "fail no-m ") || !strings.Contains(before[ns][0], "Node/") {
				return false, nil
			}
		}
		return len(cluster) > 0 && strings.Contains(cluster[0], "NodePool/"+np.Name), nil
	}); err != nil {
		t.Fatalf("no fail result naming the policy and the nodes in both namespaces' reports, or the NodePool in the cluster's: %v, %v\n%s", before, cluster, local.LogTail("karpenter", 20))
	}
	t.Logf("the audit reported the DryRun policy in %s: %v; cluster: %v", time.Since(start).Round(time.Second), before, cluster)

	// Deny: nothing running is evicted, and the reports say the same.
	cur := &policyv1.CapacityPolicy{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Enforcement = policyv1.EnforcementDeny
	if err := kube.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second)
	var after []string
	for _, ns := range []string{a, b} {
		for _, p := range podsIn(ctx, ns, "web") {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				after = append(after, ns+"/"+p.Name)
			}
		}
	}
	sort.Strings(after)
	if !slices.Equal(after, running) {
		t.Errorf("running pods changed under Deny: %v, were %v", after, running)
	}
	now, cluster2, ok := reports(ctx)
	if !ok || !slices.Equal(now[a], before[a]) || !slices.Equal(now[b], before[b]) || !slices.Equal(cluster2, cluster) {
		t.Errorf("the reports changed in substance under Deny:\n%v %v\n%v %v", before, cluster, now, cluster2)
	}
}

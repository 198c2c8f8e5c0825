package chaos

import (
	"context"
	"fmt"
	"maps"
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

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/audit"
	"github.com/karpenter-policy/karpenter/test"
)

// auditState is what a reader takes from the reports of some namespaces and the ClusterReport
// about what a test made: each result's outcome, policy, rule, subjects and timestamp, and the
// policy's status.violations.
type auditState struct {
	reports    map[string][]string
	violations policyv1.PolicyViolations
}

func (s auditState) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.reports)) {
		fmt.Fprintf(&b, "%s:\n  %s\n", k, strings.Join(s.reports[k], "\n  "))
	}
	fmt.Fprintf(&b, "violations: %+v", s.violations)
	return b.String()
}

func results(rs []reportsv1alpha1.ReportResult, keep func(reportsv1alpha1.ReportResult) bool) []string {
	var out []string
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		var subjects []string
		for _, s := range r.Subjects {
			subjects = append(subjects, s.Kind+"/"+s.Namespace+"/"+s.Name)
		}
		sort.Strings(subjects)
		out = append(out, fmt.Sprintf("%s %s %s %s @%d", r.Result, r.Policy, r.Rule, strings.Join(subjects, ","), r.Timestamp.Seconds))
	}
	sort.Strings(out)
	return out
}

// readAudit reads the reports of the namespaces (every result) and the ClusterReport (the
// results about the policy), and the policy's violation counts.
func readAudit(ctx context.Context, namespaces []string, policy string) (auditState, error) {
	s := auditState{reports: map[string][]string{}}
	for _, ns := range namespaces {
		r := &reportsv1alpha1.Report{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r); err != nil {
			return s, err
		}
		s.reports[ns] = results(r.Results, func(reportsv1alpha1.ReportResult) bool { return true })
	}
	cr := &reportsv1alpha1.ClusterReport{}
	if err := kube.Get(ctx, client.ObjectKey{Name: audit.ReportName}, cr); err != nil {
		return s, err
	}
	s.reports["(cluster)"] = results(cr.Results, func(r reportsv1alpha1.ReportResult) bool { return r.Policy == "CapacityPolicy/"+policy })
	p := &policyv1.CapacityPolicy{}
	if err := kube.Get(ctx, client.ObjectKey{Name: policy}, p); err != nil {
		return s, err
	}
	if p.Status.Violations != nil {
		s.violations = *p.Status.Violations
	}
	return s, nil
}

// SIGKILL of the leader: the standby rebuilds the reports from the cluster and the decisions
// of the reports the dead leader wrote, so every result (the pods the CapacityBudget holds
// back, a DryRun policy's failures on the nodes) and the policy's violation counts are what
// they were, timestamps included; and the standby does write (a changed message shows up).
func TestLeaderFailoverKeepsTheAuditReports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np, _ := pool(t, ctx, nil, nil)
	marker := test.Name("audited")
	open := test.Name("audit-open")
	capped := test.Name("audit-capped")
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: open, Labels: map[string]string{"audit-failover": marker}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: open}})
	})
	// A limit no node fits: the budget holds every pod of the namespace back.
	cappedNamespace(t, ctx, capped, "0.001")
	create(t, ctx, deployment(open, "web", 3, np.Name, "1"), deployment(capped, "web", 2, np.Name, "1"))
	waitRunning(t, ctx, open, "web", 3, 2*time.Minute)

	name := test.Name("no-types")
	message := func(word string) string {
		return `package karpenter.provisioning

deny_instance_types contains {"name": it.name, "msg": sprintf("%s ` + word + `", [it.name]), "rule": "no-types"} if {
	some it in input.instanceTypes
}
`
	}
	policy := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Generation = name, 0
		p.Spec.Enforcement = policyv1.EnforcementDryRun
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"audit-failover": marker}}
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "no-types.rego", Rego: message("is refused")}}
	})
	create(t, ctx, policy)

	namespaces := []string{open, capped}
	var before auditState
	var err error
	// Settled: the policy fails on the open namespace's nodes, the capped namespace's pods are
	// held, and two reads 10 s apart are the same.
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		prev := before
		if before, err = readAudit(ctx, namespaces, name); err != nil {
			return false, nil
		}
		joined := strings.Join(before.reports[open], "\n")
		held := strings.Join(before.reports[capped], "\n")
		if !strings.Contains(joined, "fail CapacityPolicy/"+name+" no-types Node/") || !strings.Contains(held, "Pod/"+capped+"/") ||
			len(before.reports["(cluster)"]) == 0 || before.violations.DryRun == 0 {
			return false, nil
		}
		if prev.String() != before.String() {
			time.Sleep(8 * time.Second)
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the audit never settled with the policy's failures and the held pods: %v\n%s", err, before)
	}
	t.Logf("before the failover:\n%s", before)

	killed, takeover := killLeader(t, ctx)
	t.Logf("killed %s; the standby led %s later", killed, takeover.Round(100*time.Millisecond))
	// The new leader's first audit; then a change of message it must write, proving it writes.
	time.Sleep(10 * time.Second)
	after, err := readAudit(ctx, namespaces, name)
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Errorf("the reports changed across the failover:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	cur := &policyv1.CapacityPolicy{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Modules[0].Rego = message("is refused after the failover")
	if err := kube.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	var last []string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		r := &reportsv1alpha1.Report{}
		if kube.Get(ctx, client.ObjectKey{Namespace: open, Name: audit.ReportName}, r) != nil {
			return false, nil
		}
		last = nil
		for _, rr := range r.Results {
			last = append(last, rr.Description)
		}
		return strings.Contains(strings.Join(last, "\n"), "is refused after the failover"), nil
	}); err != nil {
		t.Fatalf("the new leader never wrote the policy's new message: %v", last)
	}
	final, err := readAudit(ctx, namespaces, name)
	if err != nil {
		t.Fatal(err)
	}
	// The message changed, not the substance: held pods keep their decision's timestamp.
	if got, want := final.reports[capped], before.reports[capped]; !slices.Equal(got, want) {
		t.Errorf("the held pods' results changed after the new leader wrote:\nbefore: %v\nafter: %v", want, got)
	}
	if final.violations != before.violations {
		t.Errorf("violations %+v after the new leader wrote, %+v before the failover", final.violations, before.violations)
	}
}

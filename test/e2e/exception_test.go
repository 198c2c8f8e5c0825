package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/env"
)

// runningAndHeld counts an app's pods that run, and those the CapacityBudget gate holds.
func runningAndHeld(ctx context.Context, ns, app string) (running, held []string) {
	for _, p := range podsIn(ctx, ns, app) {
		switch {
		case p.Status.Phase == corev1.PodRunning:
			running = append(running, p.Name)
		case slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == policyv1.CapacityBudgetGate }):
			held = append(held, p.Name)
		}
	}
	slices.Sort(running)
	return running, held
}

// A namespace whose CapacityBudget is too small holds its pods; a CapacityException that
// raises the limit lets them run; when it expires, new pods of the namespace are held again
// while those running stay, and the exception says Expired. An exception already expired,
// or for a year, is refused at admission.
func TestCapacityExceptionRaisesABudgetUntilItExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		expires time.Time
		want    string
	}{{time.Now().Add(-time.Minute), "has already passed"}, {time.Now().Add(365 * 24 * time.Hour), "further out than the 720h0m0s"}} {
		bad := &policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: test.Name("bad")}, Spec: policyv1.CapacityExceptionSpec{
			Namespaces: []string{"default"}, Exempt: []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "*"}},
			ExpiresAt: metav1.NewTime(tc.expires), Reason: "test"}}
		if err := kube.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			_ = kube.Delete(ctx, bad)
			t.Errorf("an exception expiring at %s: %v, want refused with %q", tc.expires, err, tc.want)
		}
	}

	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			{Key: karpv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m"}},
		}
	})
	ns := namespace(t, ctx, "shop", nil)
	// $0.01/hour buys no node of the pool: every pod is held.
	create(t, ctx, budget(ns, "0.01", nil))
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Namespace{}
		return kube.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels[policyv1.NamespaceGateLabel] == policyv1.NamespaceGateLabelValue, nil
	}); err != nil {
		t.Fatal("the namespace never got the CapacityBudget gate's label")
	}
	web := namespacedDeployment(ns, "web", 4, np.Name, "500m", "1Gi")
	create(t, ctx, web)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		running, held := runningAndHeld(ctx, ns, "web")
		return len(running) == 0 && len(held) == 4, nil
	}); err != nil {
		running, held := runningAndHeld(ctx, ns, "web")
		t.Fatalf("the budget must hold all 4 pods: %d running, %d held", len(running), len(held))
	}
	// Held for a batch or two more (one every 10 s): nothing runs under $0.01/hour.
	time.Sleep(12 * time.Second)
	if running, _ := runningAndHeld(ctx, ns, "web"); len(running) != 0 {
		t.Fatalf("pods run under a $0.01/hour budget: %v", running)
	}

	extra := policyv1.Money("5.00")
	expires := time.Now().Add(45 * time.Second).Truncate(time.Second)
	ex := &policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: test.Name("launch")}, Spec: policyv1.CapacityExceptionSpec{
		Namespaces: []string{ns}, Exempt: []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: []string{policyv1.BudgetRuleHourlyCost}}},
		ExtraHourlyCost: &extra, ExpiresAt: metav1.NewTime(expires), Reason: "launch week", Ticket: "OPS-1", ApprovedBy: "platform"}}
	start := time.Now()
	create(t, ctx, ex)
	var running []string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		running, _ = runningAndHeld(ctx, ns, "web")
		return len(running) == 4, nil
	}); err != nil {
		t.Fatalf("the exception did not let the held pods run: %d running\n%s", len(running), local.LogTail("karpenter", 30))
	}
	t.Logf("the exception let 4 held pods run in %s", time.Since(start).Round(time.Second))
	cur := &policyv1.CapacityException{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(ex), cur); err != nil || !meta.IsStatusConditionTrue(cur.Status.Conditions, policyv1.ConditionTypeActive) ||
		!slices.Contains(cur.Status.Namespaces, ns) {
		t.Errorf("while it applies, status says Active with the namespace: %+v, %v", cur.Status, err)
	}

	// At expiry the status says Expired (within a reconcile) and an Event says so.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Until(expires)+time.Minute, true, func(ctx context.Context) (bool, error) {
		return kube.Get(ctx, client.ObjectKeyFromObject(ex), cur) == nil && meta.IsStatusConditionTrue(cur.Status.Conditions, policyv1.ConditionTypeExpired), nil
	}); err != nil {
		t.Fatalf("the exception never said Expired: %+v", cur.Status)
	}
	t.Logf("Expired %s after expiresAt", time.Since(expires).Round(time.Second))
	// New pods are held again; those running stay.
	patch := client.MergeFrom(web.DeepCopy())
	web.Spec.Replicas = ptr.To[int32](6)
	if err := kube.Patch(ctx, web, patch); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, held := runningAndHeld(ctx, ns, "web")
		return len(held) == 2, nil
	}); err != nil {
		t.Fatal("the two new pods were never held")
	}
	// A batch or two later, still held, and the 4 running where they were.
	time.Sleep(15 * time.Second)
	after, held := runningAndHeld(ctx, ns, "web")
	if !slices.Equal(after, running) || len(held) != 2 {
		t.Errorf("after expiry: running %v (before %v), held %d; want the same 4 running and the 2 new ones held", after, running, len(held))
	}
	if _, err := eventFor(ctx, ns, podsHeld(ctx, ns, "web")[0], "CapacityBudget "+ns+"/default"); err != nil {
		t.Errorf("a held pod carries no Event naming the budget: %v", err)
	}
}

func podsHeld(ctx context.Context, ns, app string) []string {
	_, held := runningAndHeld(ctx, ns, app)
	return held
}

// karpenterctl builds the CLI once for the suite.
func karpenterctlBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "karpenterctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/karpenterctl")
	build.Dir = env.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building karpenterctl: %v\n%s", err, out)
	}
	return bin
}

// A CapacityPolicy's admission rule gives the same verdict in karpenterctl validate and in
// the cluster's webhook: a NodePool that breaks it is refused by both with the same message,
// one within it passes both; with scopedEnforcement ci: Warn and admission: Deny, validate
// warns and exits 0 while the webhook refuses.
func TestAdmissionRuleFromPullRequestToCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := karpenterctlBin(t)
	name := test.Name("max-cpu")
	policy := func(scoped string) string {
		return `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: ` + name + `}
spec:
  enforcement: Deny` + scoped + `
  modules:
  - name: max-cpu.rego
    rego: |
      package karpenter.admission

      deny contains msg if {
        input.kind == "NodePool"
        units.parse(input.object.spec.limits.cpu) > 500
        msg := sprintf("NodePool %s: cpu limit %s is over 500", [input.object.metadata.name, input.object.spec.limits.cpu])
      }
`
	}
	class := test.KWOKNodeClass()
	create(t, ctx, class)
	nodePool := func(cpu string) *karpv1.NodePool {
		return test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef.Name = class.Name
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resourceQ(cpu)}
		})
	}
	dir := t.TempDir()
	validate := func(p string, np *karpv1.NodePool) (int, string) {
		t.Helper()
		writeManifest(t, filepath.Join(dir, "policy.yaml"), p)
		writeManifest(t, filepath.Join(dir, "nodepool.yaml"), toYAML(t, np))
		cmd := exec.Command(bin, "validate", "-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "nodepool.yaml"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}
	apply := func(p string) {
		t.Helper()
		obj := &policyv1.CapacityPolicy{}
		fromYAML(t, p, obj)
		cur := &policyv1.CapacityPolicy{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, cur); err == nil {
			obj.ResourceVersion = cur.ResourceVersion
			if err := kube.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
		} else {
			create(t, ctx, obj)
		}
		// The webhook's engine follows the policy (every replica's engine sync).
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return kube.Get(ctx, client.ObjectKey{Name: name}, cur) == nil && cur.Status.ObservedGeneration == cur.Generation &&
				meta.IsStatusConditionTrue(cur.Status.Conditions, policyv1.ConditionTypeReady), nil
		}); err != nil {
			t.Fatalf("the policy never became Ready: %+v", cur.Status)
		}
		time.Sleep(2 * time.Second)
	}

	plain := policy("")
	apply(plain)
	big, small := nodePool("600"), nodePool("400")
	code, out := validate(plain, big)
	msg := "NodePool " + big.Name + ": cpu limit 600 is over 500"
	if code != 1 || !strings.Contains(out, "NodePool/"+big.Name+": policy "+name+": "+msg) {
		t.Errorf("validate of a NodePool over the limit: exit %d\n%s", code, out)
	}
	err := kube.Create(ctx, big)
	if err == nil {
		_ = kube.Delete(ctx, big)
		t.Fatal("the webhook admitted a NodePool over the limit")
	}
	if !strings.Contains(err.Error(), "denied by policy: CapacityPolicy "+name+": "+msg) {
		t.Errorf("the webhook's refusal: %v; want the policy and %q", err, msg)
	}
	if code, out := validate(plain, small); code != 0 || strings.Contains(out, "policy "+name+":") {
		t.Errorf("validate of a NodePool within the limit: exit %d\n%s", code, out)
	}
	create(t, ctx, small)

	// Warn at ci, Deny at admission.
	scoped := policy("\n  scopedEnforcement:\n  - {points: [ci], action: Warn}\n  - {points: [admission], action: Deny}")
	apply(scoped)
	if code, out := validate(scoped, big); code != 0 || !strings.Contains(out, "warning: ") || !strings.Contains(out, "policy "+name+": "+msg) {
		t.Errorf("validate with ci: Warn: exit %d\n%s", code, out)
	}
	big = nodePool("600")
	if err := kube.Create(ctx, big); err == nil || !strings.Contains(err.Error(), "denied by policy: CapacityPolicy "+name) {
		if err == nil {
			_ = kube.Delete(ctx, big)
		}
		t.Errorf("the webhook with admission: Deny: %v", err)
	}
}

func writeManifest(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func resourceQ(s string) resource.Quantity { return resource.MustParse(s) }

// toYAML writes a v1 NodePool as a manifest.
func toYAML(t *testing.T, np *karpv1.NodePool) string {
	t.Helper()
	c := np.DeepCopy()
	c.APIVersion, c.Kind = karpv1.SchemeGroupVersion.String(), "NodePool"
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fromYAML(t *testing.T, text string, into any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(text), into); err != nil {
		t.Fatal(err)
	}
}

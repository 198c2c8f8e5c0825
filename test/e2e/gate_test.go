package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// The CapacityBudget gate (docs/architecture.md, "CapacityBudget gate"): pods a budget holds
// back stay gated, so kube-scheduler does not bind them into room another namespace's nodes
// have spare, and the budget's run-rate holds. Without the gate, kube-scheduler bound them as
// soon as room appeared (the chaos suite saw $2.42/h under a $0.60/h budget).
func TestCapacityBudgetGateKeepsHeldPodsOutOfSpareRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One NodePool for both teams; empty nodes stay, so the room team-a frees stays free.
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1h")
	})
	a := namespace(t, ctx, "gate-a", nil)
	b := namespace(t, ctx, "gate-b", nil)
	create(t, ctx, budget(b, "0.04", nil))
	// The controller labels team-b's namespace, which brings its new pods to the webhook.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ns := &corev1.Namespace{}
		if err := kube.Get(ctx, client.ObjectKey{Name: b}, ns); err != nil {
			return false, nil
		}
		return ns.Labels[policyv1.NamespaceGateLabel] == policyv1.NamespaceGateLabelValue, nil
	}); err != nil {
		t.Fatalf("namespace %s never got the %s label", b, policyv1.NamespaceGateLabel)
	}
	bPods := namespacedDeployment(b, "batch", 12, np.Name, "500m", "1Gi")
	create(t, ctx, bPods)
	var running, held, pending int
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ps := podsIn(ctx, b, "batch")
		running, held = gateCounts(t, ps)
		pending = 0
		for _, p := range ps {
			if p.Spec.NodeName == "" {
				pending++
			}
		}
		return running > 0 && running+pending == 12, nil
	}); err != nil {
		t.Fatalf("team-b: %d running, %d pending (%d held by the gate), of 12", running, pending, held)
	}
	if pending == 0 {
		t.Fatal("team-b's $0.04/hour cannot run 12 pods of 0.5 vCPU; all run")
	}
	t.Logf("team-b: %d running, %d pending, %d of them held by the gate", running, pending, held)

	// team-a fills nodes of its own, then frees most of them: room where kube-scheduler would
	// bind team-b's held pods at once if they were not gated.
	aPods := namespacedDeployment(a, "web", 8, np.Name, "1", "1Gi")
	create(t, ctx, aPods)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		r, _ := gateCounts(t, podsIn(ctx, a, "web"))
		return r == 8, nil
	}); err != nil {
		t.Fatal("team-a's 8 pods never ran")
	}
	if err := kube.Patch(ctx, aPods, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	// For several batches and kube-scheduler passes, team-b stays within its limit: the
	// provisioner may let a held pod into the freed room only as far as the budget allows.
	// Ungated, kube-scheduler bound every held pod there.
	most := 0.0
	for end := time.Now().Add(25 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		cb := &policyv1.CapacityBudget{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: b, Name: "default"}, cb); err != nil {
			continue
		}
		most = max(most, money(t, cb.Status.HourlyCost)+money(t, cb.Status.InFlightHourlyCost))
	}
	r, h := gateCounts(t, podsIn(ctx, b, "batch"))
	t.Logf("team-b after team-a freed room: %d running, %d held, at most $%.4f/h", r, h, most)
	if most > 0.04+0.005 {
		t.Fatalf("team-b ran at $%.4f/h, over its $0.04/h budget, once team-a freed room (%d running, %d held)", most, r, h)
	}
	if h == 0 || held != pending {
		t.Fatalf("the pods team-b's budget holds back are not all gated: %d of %d, then %d", held, pending, h)
	}

	// Raising the limit lifts the gate from every held pod, and they run.
	patchBudget(t, ctx, b, func(cb *policyv1.CapacityBudget) { cb.Spec.Limits.HourlyCost = ptr.To(policyv1.Money("10.00")) })
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		running, held = gateCounts(t, podsIn(ctx, b, "batch"))
		return running == 12, nil
	}); err != nil {
		t.Fatalf("raising the limit left team-b with %d running, %d held", running, held)
	}

	// A budget that only warns holds nothing back: the label goes, and new pods are not gated.
	patchBudget(t, ctx, b, func(cb *policyv1.CapacityBudget) { cb.Spec.Enforcement = policyv1.EnforcementWarn })
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ns := &corev1.Namespace{}
		if err := kube.Get(ctx, client.ObjectKey{Name: b}, ns); err != nil {
			return false, nil
		}
		_, labelled := ns.Labels[policyv1.NamespaceGateLabel]
		return !labelled, nil
	}); err != nil {
		t.Fatalf("namespace %s kept the %s label under a budget that only warns", b, policyv1.NamespaceGateLabel)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "after-warn"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{karpv1.NodePoolLabelKey: np.Name},
		Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	create(t, ctx, pod)
	if len(pod.Spec.SchedulingGates) != 0 {
		t.Errorf("a pod created under a budget that only warns was gated: %v", pod.Spec.SchedulingGates)
	}
}

// gateCounts counts the pods running and those the CapacityBudget gate holds; a held pod must
// be pending and gated by it alone, as kube-scheduler reports.
func gateCounts(t *testing.T, pods []corev1.Pod) (running, held int) {
	t.Helper()
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodRunning:
			running++
			if slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == policyv1.CapacityBudgetGate }) {
				t.Errorf("pod %s runs with the CapacityBudget gate", p.Name)
			}
		case len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == policyv1.CapacityBudgetGate:
			held++
		}
	}
	return running, held
}

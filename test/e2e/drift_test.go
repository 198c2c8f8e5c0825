package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// apart spreads a Deployment's pods one per node.
func apart(app string) func(*corev1.PodSpec) {
	return func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
	}
}

// watchDisrupting samples the pool every second until stop and records each moment more of
// its nodes were disrupting (tainted karpenter.sh/disrupted or being deleted) than allowed.
func watchDisrupting(ctx context.Context, pool string, allowed int) (stop func() []string) {
	var mu sync.Mutex
	var violations []string
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if _, nodes, disrupting, err := poolUse(ctx, pool); err == nil && disrupting > allowed {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("%s: %d of %d nodes disrupting, the budget allows %d", time.Now().Format(time.TimeOnly), disrupting, nodes, allowed))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return violations
	}
}

// Changing a NodePool's template rolls its nodes through drift, one at a time under a
// Drifted budget of 1 while an Underutilized budget of 0 holds consolidation: every node
// ends up with the new template, replaced before it drained, and the pods keep running.
func TestDriftRollsNodesWithinTheBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{
			{Nodes: "1", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
			{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty}},
		}
	})
	create(t, ctx, deployment("rolled", 3, np.Name, "1", apart("rolled")))
	before := map[string]bool{}
	for _, p := range runningPods(t, ctx, "rolled", 3) {
		before[p.Spec.NodeName] = true
	}
	if len(before) != 3 {
		t.Fatalf("the pods run on %d nodes, want 3", len(before))
	}
	stop := watchDisrupting(ctx, np.Name, 1)
	defer stop()
	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"revision": "2"} })
	// Done when the pool has three nodes, all of the new template, none of the old, and the
	// three pods run on them.
	var state string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
			return false, nil
		}
		rolled, old := 0, 0
		for _, n := range nodes.Items {
			if before[n.Name] {
				old++
			} else if n.Labels["revision"] == "2" && n.DeletionTimestamp == nil {
				rolled++
			}
		}
		running := 0
		var pods corev1.PodList
		if kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "rolled"}) == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !before[p.Spec.NodeName] {
					running++
				}
			}
		}
		state = fmt.Sprintf("%d old nodes left, %d new, %d pods running on new nodes", old, rolled, running)
		return old == 0 && rolled == 3 && running == 3, nil
	}); err != nil {
		t.Fatalf("the drift roll did not finish: %s: %v\n%s", state, err, local.LogTail("karpenter", 30))
	}
	if v := stop(); len(v) > 0 {
		t.Errorf("the watcher saw %d moments over the Drifted budget, the first: %v", len(v), v[:min(5, len(v))])
	}
}

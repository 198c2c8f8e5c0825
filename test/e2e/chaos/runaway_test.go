package chaos

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// runawayBound is upstream's: fewer than 35 nodes while every node is tainted away.
const runawayBound = 35

// Upstream's runaway scale-up scenario: a loop taints every node of the pool NoExecute as it
// appears, so the one pod is evicted from (or never fits) each node launched for it. The
// cluster keeps launching for the pod, and must keep removing what it launched: it stays
// under upstream's bound of 35 nodes, with consolidation on and with emptiness only.
func TestRunawayScaleUp(t *testing.T) {
	window := 90 * time.Second
	if *full {
		window = 5 * time.Minute // upstream's
	}
	for _, tc := range []struct {
		name   string
		policy karpv1.ConsolidationPolicy
		after  string
	}{
		{"consolidation", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, "0s"},
		{"emptiness", karpv1.ConsolidationPolicyWhenEmpty, "30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), window+3*time.Minute)
			defer cancel()
			np, _ := pool(t, ctx, nil, func(np *karpv1.NodePool) {
				np.Spec.Disruption.ConsolidationPolicy = tc.policy
				np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(tc.after)
			})
			tctx, stopTainting := context.WithCancel(ctx)
			tainted := make(chan int, 1)
			go func() { tainted <- taintLoop(tctx, np.Name) }()
			create(t, ctx, deployment("default", "runaway-"+tc.name, 1, np.Name, "1"))
			most, created := 0, map[string]bool{}
			end := time.Now().Add(window)
			for time.Now().Before(end) {
				var nodes corev1.NodeList
				if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err == nil {
					most = max(most, len(nodes.Items))
					for _, n := range nodes.Items {
						created[n.Name] = true
					}
					if len(nodes.Items) >= runawayBound {
						t.Fatalf("%d nodes for one pod: a runaway scale-up", len(nodes.Items))
					}
				}
				time.Sleep(time.Second)
			}
			stopTainting()
			t.Logf("%s: over %s, at most %d nodes at once, %d launched, %d tainted", tc.name, window, most, len(created), <-tainted)
			if len(created) < 2 {
				t.Errorf("only %d node launched: the taint loop did not evict the pod, so the scenario tested nothing", len(created))
			}
		})
	}
}

// taintLoop taints every node of np NoExecute as it appears, until ctx ends, and returns
// how many it tainted.
func taintLoop(ctx context.Context, np string) int {
	done := map[string]bool{}
	for ctx.Err() == nil {
		var nodes corev1.NodeList
		if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np}); err == nil {
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if done[n.Name] || n.DeletionTimestamp != nil {
					continue
				}
				// Optimistic lock: the taint list is replaced whole, and the manager edits it too.
				patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "chaos.karpenter.sh/evict", Value: "true", Effect: corev1.TaintEffectNoExecute})
				if kube.Patch(ctx, n, patch) == nil {
					done[n.Name] = true
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return len(done)
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// staticPool is the static pool's NodeClaims: how many are active (not being deleted), how
// many of those have a Ready node, how many are being deleted, and how many active ones carry
// the template label value. The Nodes are read after the NodeClaims, so a NodeClaim listed
// active may have lost its node by then: settleStatic retries; the roll's watcher uses staticRoll.
func isReady(n *corev1.Node) bool {
	ready, _ := scheduling.NodeReady(n)
	return ready
}

func staticPool(ctx context.Context, pool, label string) (active, ready, deleting, labelled int, err error) {
	var claims karpv1.NodeClaimList
	if err = kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			deleting++
			continue
		}
		active++
		if nc.Labels["revision"] == label {
			labelled++
		}
		n := &corev1.Node{}
		if nc.Status.NodeName != "" && kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, n) == nil && isReady(n) {
			ready++
		}
	}
	return
}

// staticRoll is the static pool from one list of its NodeClaims, a single consistent read:
// the NodeClaims up (not being deleted and Initialized, which they become once their node is
// Ready), those being deleted, and each one described for a failure to show.
func staticRoll(ctx context.Context, pool string) (up, deleting int, detail []string, err error) {
	var claims karpv1.NodeClaimList
	if err = kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return
	}
	for _, nc := range claims.Items {
		initialized := meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)
		switch {
		case nc.DeletionTimestamp != nil:
			deleting++
		case initialized:
			up++
		}
		detail = append(detail, fmt.Sprintf("%s(revision=%q initialized=%v deleting=%v)", nc.Name, nc.Labels["revision"], initialized, nc.DeletionTimestamp != nil))
	}
	return
}

// settleStatic waits until the static pool has want NodeClaims, none being deleted, each with a
// Ready node and the template label value label.
func settleStatic(t *testing.T, ctx context.Context, pool string, want int, label string) {
	t.Helper()
	var state string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		active, ready, deleting, labelled, err := staticPool(ctx, pool, label)
		state = fmt.Sprintf("%d active (%d Ready, %d of the template), %d being deleted", active, ready, labelled, deleting)
		return err == nil && active == want && ready == want && deleting == 0 && labelled == want, nil
	}); err != nil {
		t.Fatalf("the static pool never settled at %d of revision %q: %s: %v\n%s", want, label, state, err, local.LogTail("karpenter", 30))
	}
}

// watchStaticRoll samples the static pool (staticRoll) every 250 ms, within the second a step
// of a roll takes here, and keeps each moment bad reports, until the returned stop is called;
// stop returns those moments.
func watchStaticRoll(ctx context.Context, pool string, bad func(up, deleting, total int) bool) (stop func() []string) {
	var moments []string
	watchCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for watchCtx.Err() == nil {
			if up, deleting, detail, err := staticRoll(watchCtx, pool); err == nil && bad(up, deleting, len(detail)) {
				moments = append(moments, fmt.Sprintf("%s: %d up, %d being deleted: %v", time.Now().Format(time.TimeOnly), up, deleting, detail))
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		return moments
	}
}

// A static NodePool keeps replicas nodes with nothing pending; pods schedule onto them and
// nothing else is launched; a template change rolls its nodes one at a time, each replaced
// before it goes; scaling to 5 and then to 1 follows.
func TestStaticNodePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) })
	settleStatic(t, ctx, np.Name, 3, "")
	// Pods schedule onto the static nodes; nothing more is launched for them.
	create(t, ctx, deployment("on-static", 3, np.Name, "100m", nil))
	runningPods(t, ctx, "on-static", 3)
	time.Sleep(15 * time.Second)
	if active, _, _, _, _ := staticPool(ctx, np.Name, ""); active != 3 {
		t.Fatalf("the static pool has %d NodeClaims with pods on it, want 3", active)
	}

	// A template change: each node replaced before it goes, one at a time.
	stop := watchStaticRoll(ctx, np.Name, func(up, deleting, _ int) bool { return deleting > 1 || up < 3 })
	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"revision": "2"} })
	settleStatic(t, ctx, np.Name, 3, "2")
	if violations := stop(); len(violations) > 0 {
		t.Errorf("during the roll the watcher saw %d moments with more than one node going or fewer than 3 up, the first: %v", len(violations), violations[:min(5, len(violations))])
	}
	runningPods(t, ctx, "on-static", 3)

	for _, replicas := range []int64{5, 1} {
		patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To(replicas) })
		settleStatic(t, ctx, np.Name, int(replicas), "2")
	}
	// At one node the pods that do not fit stay pending: a static pool does not grow for them.
	time.Sleep(15 * time.Second)
	if active, _, _, _, _ := staticPool(ctx, np.Name, "2"); active != 1 {
		t.Errorf("the static pool of 1 has %d NodeClaims", active)
	}
	if running := runningOf(ctx, "on-static"); len(running) == 0 {
		t.Error("no pod runs on the static pool's last node")
	}
}

// A static pool scaled 3 -> 1 never picks a node with karpenter.sh/do-not-disrupt, as
// upstream's: the two others go, and the protected one is the one left.
func TestStaticScaleDownSparesDoNotDisrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) })
	settleStatic(t, ctx, np.Name, 3, "")
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	// The newest: the one an empty pool would give up first.
	newest := claims.Items[0]
	for _, nc := range claims.Items {
		if newest.CreationTimestamp.Before(&nc.CreationTimestamp) {
			newest = nc
		}
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: newest.Status.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if err := kube.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":"true"}}}`))); err != nil {
		t.Fatal(err)
	}
	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](1) })
	var left []string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now karpv1.NodeClaimList
		if err := kube.List(ctx, &now, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
			return false, nil
		}
		left = left[:0]
		for _, nc := range now.Items {
			left = append(left, nc.Name)
		}
		return len(now.Items) == 1, nil
	}); err != nil {
		t.Fatalf("the static pool did not scale down to 1: %v left\n%s", left, local.LogTail("karpenter", 20))
	}
	if left[0] != newest.Name {
		t.Errorf("%s is left; the protected %s must be the one kept", left[0], newest.Name)
	}
}

// Upstream's "terminates first when drifting an at-limit static NodePool" (TerminateFirstDrift,
// on in this suite): a static pool of 2 under limits.nodes 2 cannot surge, so a template change
// deletes its drifted nodes first, one at a time under a Drifted budget of 1, and refills. No
// moment has more than 2 NodeClaims, and the decisions are counted as terminate-first.
func TestStaticTerminateFirstAtTheNodeLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Replicas = ptr.To[int64](2)
		np.Spec.Limits = karpv1.Limits{corev1.ResourceName("nodes"): resource.MustParse("2")}
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	})
	settleStatic(t, ctx, np.Name, 2, "")
	stop := watchStaticRoll(ctx, np.Name, func(_, _, total int) bool { return total > 2 })
	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"revision": "2"} })
	settleStatic(t, ctx, np.Name, 2, "2")
	if over := stop(); len(over) > 0 {
		t.Errorf("the watcher saw %d moments with more NodeClaims than limits.nodes 2, the first: %v", len(over), over[:min(5, len(over))])
	}
	body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`karpenter_voluntary_disruption_terminate_first_decisions_total{nodepool=%q,reason="drifted",terminate_first_reason="static-at-limit"} 2`, np.Name)
	if !strings.Contains(body, want) {
		t.Errorf("/metrics has no %s", want)
	}
}

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/disruption"
)

// poolUse is the share of the pool's allocatable cpu its pods request, its node count, and how
// many of its nodes are disrupting (tainted karpenter.sh/disrupted or being deleted).
func poolUse(ctx context.Context, pool string) (used float64, nodes, disrupting int, err error) {
	var ns corev1.NodeList
	if err = kube.List(ctx, &ns, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return 0, 0, 0, err
	}
	var pods corev1.PodList
	if err = kube.List(ctx, &pods); err != nil {
		return 0, 0, 0, err
	}
	inPool := map[string]bool{}
	alloc := 0.0
	for _, n := range ns.Items {
		inPool[n.Name] = true
		alloc += float64(n.Status.Allocatable.Cpu().MilliValue())
		tainted := false
		for _, t := range n.Spec.Taints {
			tainted = tainted || t.Key == karpv1.DisruptedTaintKey
		}
		if tainted || n.DeletionTimestamp != nil {
			disrupting++
		}
	}
	req := 0.0
	for _, p := range pods.Items {
		if !inPool[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			req += float64(c.Resources.Requests.Cpu().MilliValue())
		}
	}
	if alloc == 0 {
		return 0, 0, disrupting, nil
	}
	return req / alloc, len(ns.Items), disrupting, nil
}

// Scaling a Deployment of 200 pods on the sample general pool down to 20, with a PDB of
// minAvailable 18, leaves the pool at least half requested within five minutes, while a
// watcher sampling every 2 s sees no more nodes disrupting than the pool's budget (10%,
// rounded up) allows and never fewer than 18 of the 20 pods available.
func TestConsolidationAfterScaleDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	d := deployment("shrink", 200, "general", "900m", nil)
	pdb := &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "shrink", Namespace: "default"},
		Spec: k8spolicyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(18)), Selector: d.Spec.Selector}}
	create(t, ctx, pdb, d)
	runningPods(t, ctx, "shrink", 200)
	if err := kube.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	base := d.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](20)
	if err := kube.Patch(ctx, d, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	runningPods(t, ctx, "shrink", 20)

	var mu sync.Mutex
	var violations []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			_, nodes, disrupting, err := poolUse(watchCtx, "general")
			var pods corev1.PodList
			if err != nil || kube.List(watchCtx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "shrink"}) != nil {
				continue
			}
			available := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && ready(&p) {
					available++
				}
			}
			// The budget is 10% of the pool's nodes, rounded up; nodes already gone
			// counted the allowance at the time, so allow the pool size seen plus those
			// disrupting (which are part of it).
			allowed := (10*nodes + 99) / 100
			mu.Lock()
			if disrupting > allowed {
				violations = append(violations, fmt.Sprintf("%d of %d nodes disrupting, the budget allows %d", disrupting, nodes, allowed))
			}
			if available < 18 {
				violations = append(violations, fmt.Sprintf("only %d of 20 pods available", available))
			}
			mu.Unlock()
		}
	}()
	var used float64
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		var disrupting int
		used, _, disrupting, err = poolUse(ctx, "general")
		return err == nil && used >= 0.5 && disrupting == 0, nil
	}); err != nil {
		_, nodes, _, _ := poolUse(ctx, "general")
		t.Fatalf("the general pool is %.0f%% requested on %d nodes after 5 minutes: %v\n%s", used*100, nodes, err, local.LogTail("karpenter", 30))
	}
	stopWatch()
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Errorf("the watcher saw %d violations, the first: %v", len(violations), violations[:min(5, len(violations))])
	}
	runningPods(t, ctx, "shrink", 20)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// A node holding a pod with karpenter.sh/do-not-disrupt stays while the annotation does, and
// goes once it is removed; consolidation leaves the node of a PDB-pinned pod alone the same
// way.
func TestDoNotDisruptAndPDBHoldTheirNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// A preferred anti-affinity puts the two pods on two nodes at launch; consolidation may
	// relax it, so once released the pods can share a node and one node can go.
	apart := func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"hold-test": "apart"}}}}}}}
	}
	held := deployment("held", 1, "general", "100m", apart)
	held.Spec.Template.Labels["hold-test"] = "apart"
	held.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	pinned := deployment("pinned", 1, "general", "100m", apart)
	pinned.Spec.Template.Labels["hold-test"] = "apart"
	pdb := &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "default"},
		Spec: k8spolicyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: pinned.Spec.Selector}}
	create(t, ctx, held, pdb, pinned)
	heldNode := nodeOf(t, ctx, runningPods(t, ctx, "held", 1)[0])
	pinnedNode := nodeOf(t, ctx, runningPods(t, ctx, "pinned", 1)[0])
	// Both nodes are underutilized (a 100m pod each): without the holds, consolidation would
	// move the pods and remove a node within consolidateAfter (30 s) plus a pass or two. The
	// hold lasts until disruption has noted why it leaves each node (its DisruptionBlocked
	// events, told from the first pass), then a pass and the validation delay more, and at
	// least until an unheld node would have been tainted: consolidateAfter (30 s in the
	// sample), two passes and the validation delay. At most the 2m15s it took before.
	start := time.Now()
	atLeast := start.Add(30*time.Second + 2*disruption.PollPeriod + disruption.ValidationDelay)
	deadline := start.Add(2*time.Minute + disruption.ValidationDelay)
	// Either hold may be the one a node's event names (both pods may share a node).
	holds := map[string]bool{heldNode.Name: true, pinnedNode.Name: true}
	noted := map[string]bool{}
	for time.Now().Before(deadline) {
		for _, n := range []*corev1.Node{heldNode, pinnedNode} {
			cur := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(n), cur); err != nil || cur.DeletionTimestamp != nil {
				t.Fatalf("node %s went while a pod held it: %v", n.Name, err)
			}
			if !noted[n.Name] {
				_, errHeld := nodeClaimEvent(ctx, []string{n.Name}, "DisruptionBlocked", "do-not-disrupt")
				_, errPDB := nodeClaimEvent(ctx, []string{n.Name}, "DisruptionBlocked", "PodDisruptionBudget")
				if errHeld == nil || errPDB == nil {
					noted[n.Name] = true
					if len(noted) == len(holds) {
						deadline = time.Now().Add(disruption.PollPeriod + disruption.ValidationDelay)
						if deadline.Before(atLeast) {
							deadline = atLeast
						}
					}
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	hold := time.Since(start)
	t.Logf("held for %s; noted %v", hold.Round(time.Second), noted)
	// Release both: the pods may now move, and an underutilized node goes.
	var d appsv1.Deployment
	if err := kube.Get(ctx, client.ObjectKeyFromObject(held), &d); err != nil {
		t.Fatal(err)
	}
	base := d.DeepCopy()
	d.Spec.Template.Annotations = nil
	if err := kube.Patch(ctx, &d, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	if heldNode.Name == pinnedNode.Name {
		t.Logf("both pods landed on %s; it held for %s", heldNode.Name, hold)
		return
	}
	// Two nodes with a 100m pod each: once released, consolidation puts both pods on one.
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range []*corev1.Node{heldNode, pinnedNode} {
			cur := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(n), cur); err != nil || cur.DeletionTimestamp != nil {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("neither node went once released: %v\n%s", err, local.LogTail("karpenter", 30))
	}
}

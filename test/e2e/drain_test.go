package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/providers/kwok"
)

// gone waits up to limit for the node to be deleted, and says how long it took.
func gone(ctx context.Context, t *testing.T, node string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})), nil
	}); err != nil {
		var pods corev1.PodList
		_ = kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node})
		var left []string
		for _, p := range pods.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		t.Fatalf("node %s still there after %s, pods on it %v\n%s", node, limit, left, local.LogTail("karpenter", 30))
	}
	return time.Since(start)
}

// A DaemonSet whose pods tolerate every taint (operator: Exists) is scheduled straight back
// onto a draining node; the drain neither evicts nor waits for it, so a deleted node and a
// consolidated one both go within a minute.
func TestTolerantDaemonSetDoesNotHoldANodeThatGoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	})
	labels := map[string]string{"app": "tolerant-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "tolerant-agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: np.Name},
				Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}},
			}}},
	}
	create(t, ctx, ds, deployment("tolerated", 2, np.Name, "500m", apart("tolerated")))
	pods := runningPods(t, ctx, "tolerated", 2)
	first, second := nodeOf(t, ctx, pods[0]), nodeOf(t, ctx, pods[1])
	// Each node runs its agent.
	agents := runningPods(t, ctx, "tolerant-agent", 2)

	// Deleted: the NodeClaim goes, its node drains around the agent.
	claims := claimsOf(t, ctx, first.Name)
	if err := kube.Delete(ctx, &claims[0]); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted node %s went in %s", first.Name, gone(ctx, t, first.Name, time.Minute).Round(100*time.Millisecond))

	// Consolidated: with its workload gone, the other node is empty but for the agent.
	d := &appsv1.Deployment{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "tolerated"}, d); err != nil {
		t.Fatal(err)
	}
	base := d.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](0)
	if err := kube.Patch(ctx, d, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	t.Logf("consolidated node %s went in %s", second.Name, gone(ctx, t, second.Name, time.Minute).Round(100*time.Millisecond))
	// The drain left the agents alone: evicting them would only have them put back.
	time.Sleep(2 * time.Second) // events are written asynchronously
	var evs eventsv1.EventList
	if err := kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		for _, a := range agents {
			if e.Regarding.Name == a.Name && e.Reason == "Evicted" {
				t.Errorf("the drain evicted the agent %s, which tolerates the disrupted taint: %s", a.Name, e.Note)
			}
		}
	}
}

// claimsOf are the NodeClaims of a node. Registration lifts the node's unregistered taint
// before it records status.nodeName, so a pod can run on the node a moment before its
// NodeClaim names it: the lookup waits up to 30 s for that.
func claimsOf(t *testing.T, ctx context.Context, node string) []karpv1.NodeClaim {
	t.Helper()
	var out []karpv1.NodeClaim
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := kube.List(ctx, &claims); err != nil {
			return false, nil
		}
		out = out[:0]
		for _, nc := range claims.Items {
			if nc.Status.NodeName == node {
				out = append(out, nc)
			}
		}
		return len(out) > 0, nil
	})
	if len(out) == 0 {
		t.Fatalf("node %s has no NodeClaim after 30 s", node)
	}
	return out
}

// A reclaimed Spot instance takes its kubelet with it: the node goes NotReady and nothing
// will ever confirm its pods' deletion. Its drain is held by a pod stuck terminating (a
// finalizer) and by a PodDisruptionBudget that allows no eviction; once the instance is gone,
// the node is finalized at once instead of draining forever.
func TestNodeWhoseInstanceIsGoneIsFinalized(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const notice = 30 * time.Second
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.Interruption = &kwokv1alpha1.InterruptionInjection{Notice: &metav1.Duration{Duration: notice}}
	}, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}}}
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	const hold = "e2e.karpenter.sh/hold"
	held := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default", Labels: map[string]string{"app": "held"}, Finalizers: []string{hold}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{karpv1.NodePoolLabelKey: np.Name},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
	}
	guarded := held.DeepCopy()
	guarded.Name, guarded.Labels, guarded.Finalizers = "guarded", map[string]string{"app": "guarded"}, nil
	guarded.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}}}}}}
	pdb := &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: k8spolicyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	create(t, ctx, pdb, held, guarded)
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if kube.Get(context.Background(), client.ObjectKeyFromObject(held), p) == nil {
			base := p.DeepCopy()
			p.Finalizers = nil
			_ = kube.Patch(context.Background(), p, client.MergeFrom(base))
		}
	})
	runningPods(t, ctx, "held", 1)
	pods := runningPods(t, ctx, "guarded", 1)
	node := nodeOf(t, ctx, pods[0])

	base := node.DeepCopy()
	node.Annotations[kwok.InterruptAnnotation] = "true"
	if err := kube.Patch(ctx, node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	// The notice deletes the NodeClaim: the node drains, and its drain is held.
	var deadline time.Time
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if kube.Get(ctx, client.ObjectKeyFromObject(node), n) != nil || n.DeletionTimestamp == nil {
			return false, nil
		}
		deadline, _ = time.Parse(time.RFC3339, n.Annotations[kwok.InterruptionDeadlineAnnotation])
		return true, nil
	}); err != nil {
		t.Fatalf("node %s never started draining after the interruption notice", node.Name)
	}
	// Held by the PDB until the instance is reclaimed at the notice's deadline (the provider
	// looks every 5 s), then finalized at once.
	took := gone(ctx, t, node.Name, time.Until(deadline)+30*time.Second)
	wentAt := time.Now()
	if wentAt.Before(deadline) {
		t.Fatalf("node %s was finalized at %s, before its instance was reclaimed at %s: the drain did not wait for its pods",
			node.Name, wentAt.Format(time.TimeOnly), deadline.Format(time.TimeOnly))
	}
	if late := wentAt.Sub(deadline); late > kwok.InterruptionTick+15*time.Second {
		t.Errorf("node %s went %s after its instance was reclaimed: a node whose instance is gone is finalized at once", node.Name, late.Round(time.Second))
	}
	t.Logf("the instance of %s was reclaimed at %s; the node, held by a stuck pod and a PDB, was gone %s later (%s after the notice)",
		node.Name, deadline.Format(time.TimeOnly), wentAt.Sub(deadline).Round(100*time.Millisecond), took.Round(100*time.Millisecond))
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if nc.Status.NodeName == node.Name {
			if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(&nc), &karpv1.NodeClaim{})), nil
			}); err != nil {
				t.Errorf("the NodeClaim %s of the finalized node is still there", nc.Name)
			}
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/providers/kwok"
)

// Killing the controller in the middle of a scale-up and starting it again leaks no node and
// launches no capacity twice.
func TestControllerCrashDuringScaleUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A launch delay keeps NodeClaims in flight when the controller dies.
	np := isolated(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.LaunchDelay = metav1Duration(3 * time.Second) }, nil)
	create(t, ctx, deployment("crash", 12, np.Name, "1", nil))
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name})
		return err == nil && len(claims.Items) > 0, nil
	}); err != nil {
		t.Fatal("no NodeClaim was created")
	}
	if err := local.Kill("karpenter"); err != nil {
		t.Fatal(err)
	}
	var before karpv1.NodeClaimList
	if err := kube.List(ctx, &before, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	if err := local.Restart("karpenter"); err != nil {
		t.Fatal(err)
	}
	pods := runningPods(t, ctx, "crash", 12)
	var after karpv1.NodeClaimList
	if err := kube.List(ctx, &after, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Spec.NodeName] = true
	}
	for _, nc := range after.Items {
		if !used[nc.Status.NodeName] {
			t.Errorf("NodeClaim %s (%s) runs none of the pods: capacity launched twice", nc.Name, nc.Labels[karpv1.LabelInstanceType])
		}
	}
	if t.Failed() {
		for _, nc := range after.Items {
			t.Logf("NodeClaim %s: created %s, node %q", nc.Name, nc.CreationTimestamp.Format(time.TimeOnly), nc.Status.NodeName)
		}
		t.Logf("the restarted manager's log:\n%s", local.LogTail("karpenter", 300))
	}
	// Every kwok node belongs to a NodeClaim: nothing leaked.
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	var all karpv1.NodeClaimList
	if err := kube.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, nc := range all.Items {
		owned[nc.Status.ProviderID] = true
	}
	for _, n := range nodes.Items {
		if n.Annotations[kwok.NodeAnnotation] == "fake" && !owned[n.Spec.ProviderID] && n.DeletionTimestamp == nil {
			t.Errorf("node %s has no NodeClaim: leaked", n.Name)
		}
	}
	t.Logf("%d NodeClaims in flight at the crash, %d after; 12 pods running", len(before.Items), len(after.Items))
}

// Killing the manager while a consolidation waits for its replacement to launch: the manager
// that starts next takes the command over from the objects (its replacement exists) and
// finishes it, or rolls it back; either way no node stays tainted karpenter.sh/disrupted, and
// no NodeClaim is left beyond what the pods need once the cluster settles.
func TestControllerCrashDuringReplace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A launch delay keeps the replacement in flight long enough to kill the manager.
	np := isolated(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.LaunchDelay = metav1Duration(20 * time.Second) }, nil)
	anchor := deployment("anchor", 1, np.Name, "3", nil)
	create(t, ctx, anchor)
	big := nodeOf(t, ctx, runningPods(t, ctx, "anchor", 1)[0])
	// The tenant joins the anchor's node (the pool's only one, with room), then the anchor
	// goes: a node sized for 3 CPUs runs 100m, and consolidation replaces it by a cheaper one.
	create(t, ctx, deployment("tenant", 1, np.Name, "100m", nil))
	if on := runningPods(t, ctx, "tenant", 1)[0].Spec.NodeName; on != big.Name {
		t.Fatalf("the tenant runs on %s, not beside the anchor on %s", on, big.Name)
	}
	if err := kube.Delete(ctx, anchor); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if kube.Get(ctx, client.ObjectKeyFromObject(big), n) != nil || !tainted(n) {
			return false, nil
		}
		var claims karpv1.NodeClaimList
		if kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil {
			return false, nil
		}
		// The replacement not launched yet: with the launch delay it is 20 s from initializing,
		// so the kill lands in the middle of the replace.
		for _, nc := range claims.Items {
			if nc.Status.NodeName != big.Name && !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("consolidation never started replacing %s: %v\n%s", big.Name, err, local.LogTail("karpenter", 30))
	}
	if err := local.Kill("karpenter"); err != nil {
		t.Fatal(err)
	}
	if n := (&corev1.Node{}); kube.Get(ctx, client.ObjectKeyFromObject(big), n) != nil || !tainted(n) || n.DeletionTimestamp != nil {
		t.Fatalf("%s was not tainted, or already going, when the manager died: the crash did not interrupt the replace", big.Name)
	}
	if err := local.Restart("karpenter"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		err := kube.Get(ctx, client.ObjectKeyFromObject(big), n)
		return err != nil || n.DeletionTimestamp != nil || !tainted(n), nil
	}); err != nil {
		t.Fatalf("%s stayed tainted after the restart\n%s", big.Name, local.LogTail("karpenter", 30))
	}
	t.Logf("the taint was gone or the node going %s after the restart", time.Since(restarted).Round(time.Second))
	// The restarted manager took the command over from the objects (its replacement existed)
	// or rolled it back; it says which.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		log := local.LogTail("karpenter", 400)
		return strings.Contains(log, "adopting a disruption command in flight") || strings.Contains(log, "rolling back a disruption command"), nil
	}); err != nil {
		t.Errorf("the restarted manager did not say it adopted or rolled back the command:\n%s", local.LogTail("karpenter", 40))
	}
	// Settled: one NodeClaim, running the tenant, and no node tainted.
	var state string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		var nodes corev1.NodeList
		if kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil ||
			kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil {
			return false, nil
		}
		pods := runningOf(ctx, "tenant")
		anyTainted := false
		for i := range nodes.Items {
			anyTainted = anyTainted || tainted(&nodes.Items[i])
		}
		state = fmt.Sprintf("%d NodeClaims, %d nodes, tainted %v, tenant on %v", len(claims.Items), len(nodes.Items), anyTainted, pods)
		return len(claims.Items) == 1 && len(nodes.Items) == 1 && !anyTainted && len(pods) == 1 && pods[0] == claims.Items[0].Status.NodeName, nil
	}); err != nil {
		t.Fatalf("the pool never settled after the crash: %s: %v\n%s", state, err, local.LogTail("karpenter", 40))
	}
	t.Logf("settled %s after the restart: %s", time.Since(restarted).Round(time.Second), state)
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// runningOf names the nodes the app's running pods are on.
func runningOf(ctx context.Context, app string) []string {
	var pods corev1.PodList
	if kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}) != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out
}

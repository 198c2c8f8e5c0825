package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider/kwok"
	corev1 "k8s.io/api/core/v1"
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

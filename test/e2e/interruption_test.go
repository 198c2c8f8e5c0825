package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider/kwok"
)

// A Spot node the kwok provider interrupts gets the notice, is reclaimed when it runs out,
// and its pods run again on a new node.
func TestSpotInterruptionReschedulesPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.Interruption = &kwokv1alpha1.InterruptionInjection{SpotPercentPerHour: 0, Notice: &metav1.Duration{Duration: 5 * time.Second}}
	}, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}}}
	})
	create(t, ctx, deployment("reclaimed", 2, np.Name, "500m", nil))
	before := runningPods(t, ctx, "reclaimed", 2)
	node := nodeOf(t, ctx, before[0])
	base := node.DeepCopy()
	node.Annotations[kwok.InterruptAnnotation] = "true"
	if err := kube.Patch(ctx, node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
		return err != nil, nil
	}); err != nil {
		t.Fatalf("the interrupted node %s was never reclaimed", node.Name)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "reclaimed"}); err != nil {
			return false, nil
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != node.Name && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n == 2, nil
	}); err != nil {
		t.Fatalf("the pods never ran again elsewhere: %v\n%s", err, local.LogTail("karpenter", 20))
	}
}

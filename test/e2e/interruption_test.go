package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/providers/kwok"
)

// A Spot node the kwok provider interrupts gets the notice; the interruption controller
// deletes its NodeClaim at once, so that the pods run again on a new node before the notice
// runs out and the instance is reclaimed.
func TestSpotInterruptionReschedulesPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const notice = 90 * time.Second
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.Interruption = &kwokv1alpha1.InterruptionInjection{SpotPercentPerHour: 0, Notice: &metav1.Duration{Duration: notice}}
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
	// The notice runs from when the provider sees the annotation, no earlier than now.
	deadline := time.Now().Add(notice)
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if kube.List(ctx, &evs) != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == node.Name && e.Reason == "SpotInterruption" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node %s never got the interruption notice", node.Name)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
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
	// The manager's Events, as upstream's AWS provider records them, on the Node and its
	// NodeClaim: the notice, then the termination it triggered.
	var evs eventsv1.EventList
	if err := kube.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range evs.Items {
		got[e.Regarding.Kind+"/"+e.Reason] = got[e.Regarding.Kind+"/"+e.Reason] || e.Regarding.Name == node.Name || e.Regarding.Kind == "NodeClaim"
	}
	for _, want := range []string{"Node/SpotInterrupted", "Node/TerminatingOnInterruption", "NodeClaim/SpotInterrupted", "NodeClaim/TerminatingOnInterruption"} {
		if !got[want] {
			t.Errorf("no %s Event from the manager", want)
		}
	}
	if left := time.Until(deadline); left <= 0 {
		t.Errorf("the pods ran elsewhere only %s after the reclaim deadline %s", -left, deadline.Format(time.TimeOnly))
	} else {
		t.Logf("the pods ran elsewhere %s before the reclaim deadline", left.Round(time.Second))
	}
	// The interrupted node goes (drained by termination, or reclaimed at the deadline).
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Until(deadline)+time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
		return err != nil, nil
	}); err != nil {
		t.Fatalf("the interrupted node %s never went", node.Name)
	}
}

package consistency

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// A node whose memory is under 90% of what its NodeClaim expected is inconsistent, with an
// event naming the resource; one at 90% or more is consistent; and a NodeClaim is checked
// again only after ScanPeriod.
func TestConsistency(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: "u1", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}}}
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	nc.Status.NodeName = "node"
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("14Gi")}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc, node).WithStatusSubresource(&karpv1.NodeClaim{}).Build()
	recorder := events.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(time.Now())
	c := NewController(kube, recorder, clk)
	ctx := context.Background()
	check := func() *metav1.Condition {
		t.Helper()
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reconcile(ctx, got); err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeConsistentStateFound)
	}

	if cond := check(); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonFailed {
		t.Fatalf("14Gi of 16Gi (87.5%%): %+v, want False", cond)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "FailedConsistencyCheck") || !strings.Contains(e, "expected 16Gi of resource memory, but found 14Gi (87.5% of expected)") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no FailedConsistencyCheck event")
	}

	node.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("15Gi")
	if err := kube.Status().Update(ctx, node); err != nil {
		if err := kube.Update(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	if cond := check(); cond.Status != metav1.ConditionFalse {
		t.Errorf("checked again before ScanPeriod: %+v", cond)
	}
	clk.Step(ScanPeriod)
	if cond := check(); cond.Status != metav1.ConditionTrue {
		t.Errorf("15Gi of 16Gi (93.75%%) after ScanPeriod: %+v, want True", cond)
	}
	if len(recorder.Events) != 0 {
		t.Errorf("an event for a consistent node: %q", <-recorder.Events)
	}
}

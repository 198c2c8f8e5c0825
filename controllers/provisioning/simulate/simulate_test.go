package simulate

import (
	"context"
	"fmt"
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpenter-policy/karpenter/controllers/provisioning/policy"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/test"
)

// karpenterctl simulate reports the Spot share's one answer, whether the usage was there
// before the batch or the batch added it.
func TestSimulateSpotPercentAgreesWithTheDefinition(t *testing.T) {
	for _, tc := range test.SpotShareCases {
		b := policies.SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		ns := &policy.Namespace{Before: policies.Usage{SpotCPU: tc.SpotCPU / 2, OnDemandCPU: tc.OnDemandCPU},
			Added: policies.Usage{SpotCPU: tc.SpotCPU / 2}, Budget: &policies.BudgetInForce{Spot: b}}
		if got := SpotPercent(ns); math.Abs(got-tc.Percent) > 1e-9 {
			t.Errorf("%s: simulate reports %.4f%%, want %.4f%%", tc.Name, got, tc.Percent)
		}
	}
}

// With no NodePool (a plan's empty base) and no policies, every pod stays pending, listed in
// natural order (web-2 before web-10), as with policies.
func TestNoNodePoolLeavesEveryPodPendingInOrder(t *testing.T) {
	replicas := int32(12)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}
	r, err := Run(context.Background(), &Input{Workloads: []runtime.Object{d}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Totals.Nodes != 0 || r.Totals.PricePerHour != 0 || len(r.Unschedulable) != 12 {
		t.Fatalf("no NodePool: %d nodes, $%.4f/hour, %d pending; want none, nothing, 12", r.Totals.Nodes, r.Totals.PricePerHour, len(r.Unschedulable))
	}
	for i, u := range r.Unschedulable {
		if want := fmt.Sprintf("team-a/web-%d", i); u.Pod != want {
			t.Fatalf("pending pod %d is %s, want %s (natural order)", i, u.Pod, want)
		}
	}
}

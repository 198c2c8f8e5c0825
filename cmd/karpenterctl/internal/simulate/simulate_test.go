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

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/test"
)

// karpenterctl simulate reports the Spot share's one answer, whether the usage was there
// before the batch or the batch added it.
func TestSimulateSpotPercentAgreesWithTheDefinition(t *testing.T) {
	for _, tc := range test.SpotShareCases {
		b := policies.SpotBounds{MinPercent: tc.MinPercent, MaxPercent: tc.MaxPercent, OnDemandBaseCPU: tc.OnDemandBaseCPU}
		ns := &planner.Namespace{Before: policies.Usage{SpotCPU: tc.SpotCPU / 2, OnDemandCPU: tc.OnDemandCPU},
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

// The total is the sum of the node prices the report lists, so a reader (and plan's tables per
// NodePool) adds up what is printed: prices with more than four decimals are rounded per node
// first. Sixteen nodes at $0.12346 are 16 x 0.1235 = 1.976, not round(1.97536) = 1.9754.
func TestTotalIsTheSumOfTheListedNodePrices(t *testing.T) {
	it := &cloudprovider.InstanceType{Name: "m5.large",
		Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large", karpv1.LabelInstanceFamily: "m5", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110")},
		Offerings: []cloudprovider.Offering{{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.12346, Available: true}}}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}}}
	replicas := int32(16)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}}}}
	r, err := Run(context.Background(), &Input{NodePools: []*karpv1.NodePool{np}, Workloads: []runtime.Object{d}, InstanceTypes: []*cloudprovider.InstanceType{it}})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, nc := range r.NodeClaims {
		sum += nc.PricePerHour
	}
	if len(r.NodeClaims) != 16 || r.NodeClaims[0].PricePerHour != 0.1235 || math.Abs(r.Totals.PricePerHour-sum) > 1e-9 || r.Totals.PricePerHour != 1.976 {
		t.Fatalf("%d nodes at $%.4f: total $%v/hour, the listed prices sum to $%v; want 16 at 0.1235, 1.976", len(r.NodeClaims), r.NodeClaims[0].PricePerHour, r.Totals.PricePerHour, sum)
	}
}

package simulate

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// simulate --disrupt with TerminateFirstDrift: a drifted node in a full reservation that is
// the only room for its pod is a terminate-first command, whose replacements are the refill
// into the freed slot, so the cluster after still runs the pod at the same price.
func TestDisruptReportsTerminateFirstWithItsRefill(t *testing.T) {
	it := &cloudprovider.InstanceType{Name: "m5.large", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64",
		corev1.LabelOSStable: "linux"}, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("29")},
		Offerings: []cloudprovider.Offering{{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved, Price: 0.0001, ReservationID: "cr-1"}}}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "reserved"}, Spec: karpv1.NodePoolSpec{
		Template: karpv1.NodeClaimTemplate{ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"revision": "2"}}, Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
				Values: []string{karpv1.CapacityTypeReserved}}}}},
		Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("Never"), Budgets: []karpv1.Budget{{Nodes: "100%"}}}}}
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), Labels: map[string]string{
		karpv1.NodePoolLabelKey: "reserved", corev1.LabelInstanceTypeStable: "m5.large", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved,
		corev1.LabelTopologyZone: "z-a", karpv1.LabelCapacityReservationID: "cr-1"}},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable(), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "old",
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	for _, gate := range []bool{false, true} {
		r, err := Disrupt(context.Background(), &DisruptInput{Input: Input{NodePools: []*karpv1.NodePool{np}, Nodes: []*corev1.Node{node},
			BoundPods: []*corev1.Pod{pod}, InstanceTypes: []*cloudprovider.InstanceType{it}}, Now: now,
			Options: methods.Options{TerminateFirstDrift: gate}})
		if err != nil {
			t.Fatal(err)
		}
		d := r.Disruption
		if !gate {
			if len(d.Commands) != 0 {
				t.Errorf("without the gate: %+v, want no command", d.Commands)
			}
			continue
		}
		if len(d.Commands) != 1 {
			t.Fatalf("commands %+v, want one", d.Commands)
		}
		c := d.Commands[0]
		if c.Decision != methods.TerminateFirstDecision || len(c.Replacements) != 1 || c.Replacements[0].CapacityType != karpv1.CapacityTypeReserved {
			t.Errorf("command %+v, want terminate-first with its refill into the reservation", c)
		}
		if d.Totals.NodesAfter != 1 || d.Totals.PricePerHourAfter != d.Totals.PricePerHourBefore {
			t.Errorf("totals %+v, want the pod still running on one node at the same price", d.Totals)
		}
	}
}

package aws_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

func instanceType(name string, cpu int, od float64) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{Name: name,
		Labels: map[string]string{karpv1.LabelInstanceType: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 4*cpu)), corev1.ResourcePods: resource.MustParse("110")}}
	for _, z := range []string{"us-west-2a", "us-west-2b"} {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: od * 0.4, Available: true})
	}
	return it
}

func TestReservedOfferings(t *testing.T) {
	it := instanceType("m5.large", 2, 0.096)
	rs := []awsv1.CapacityReservation{
		{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: "us-west-2a", State: awsv1.CapacityReservationStateActive},
		{ID: "cr-2", InstanceType: "m5.large", AvailabilityZone: "us-west-2b", State: awsv1.CapacityReservationStateExpiring},
		{ID: "cr-3", InstanceType: "c5.large", AvailabilityZone: "us-west-2a"},
		{ID: "cr-4", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"},
		{ID: "cr-5", InstanceType: "m5.large", AvailabilityZone: "us-west-2b", State: awsv1.CapacityReservationStateActive},
	}
	room := map[string]int{"cr-1": 3, "cr-2": 4, "cr-5": 0}
	got := map[string]cloudprovider.Offering{}
	for _, o := range aws.ReservedOfferings(it, rs, func(id string) int { return room[id] }) {
		if o.CapacityType == karpv1.CapacityTypeReserved {
			got[o.ReservationID] = o
		}
	}
	if len(got) != 3 {
		t.Fatalf("want reserved offerings for cr-1, cr-2 and cr-5 (not another type's, not a zone the type is not sold in), got %v", got)
	}
	if o := got["cr-1"]; !o.Available || o.ReservationCapacity != 3 || o.Zone != "us-west-2a" || o.Price <= 0 || o.Price >= 0.096*0.4 {
		t.Errorf("cr-1: %+v", o)
	}
	if got["cr-2"].Available {
		t.Errorf("an expiring reservation is not available: %+v", got["cr-2"])
	}
	if got["cr-5"].Available {
		t.Errorf("a reservation without room is not available: %+v", got["cr-5"])
	}
}

// TestASelectedReservationIsFilledFirst follows a reservation from an EC2NodeClass's status
// to the NodeClaims the provisioner would create: the solver fills its room before it takes
// spot, and each NodeClaim it gives room to is pinned to the reservation.
func TestASelectedReservationIsFilledFirst(t *testing.T) {
	nodeClass := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{CapacityReservations: []awsv1.CapacityReservation{
		{ID: "cr-0abc", InstanceType: "m5.xlarge", AvailabilityZone: "us-west-2b", OwnerID: "012345678901", InstanceMatchCriteria: "targeted",
			ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive},
	}}}
	room := func(string) int { return 2 }
	var types []*cloudprovider.InstanceType
	for _, it := range []*cloudprovider.InstanceType{instanceType("m5.large", 2, 0.096), instanceType("m5.xlarge", 4, 0.192)} {
		it.Offerings = aws.ReservedOfferings(it, nodeClass.Status.CapacityReservations, room)
		types = append(types, it)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}}},
	}}}}
	var pods []*corev1.Pod
	for i := range 4 { // each needs an m5.xlarge of its own
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%d", i), Namespace: "ml"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("8Gi")}}}}}})
	}
	r, err := solver.Solve(&solver.Input{Pods: pods, NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: types}}})
	if err != nil {
		t.Fatal(err)
	}
	reserved, spot := 0, 0
	for _, c := range r.NodeClaims {
		nc := solver.NodeClaimFor(np, c)
		reqs := map[string][]string{}
		for _, req := range nc.Spec.Requirements {
			reqs[req.Key] = req.Values
		}
		switch c.Offering.CapacityType {
		case karpv1.CapacityTypeReserved:
			reserved++
			want := map[string][]string{karpv1.CapacityTypeLabelKey: {"reserved"}, karpv1.LabelTopologyZone: {"us-west-2b"},
				karpv1.LabelCapacityReservationID: {"cr-0abc"}, karpv1.LabelInstanceType: {"m5.xlarge"}}
			for k, v := range want {
				if fmt.Sprint(reqs[k]) != fmt.Sprint(v) {
					t.Errorf("NodeClaim in the reservation: %s = %v, want %v", k, reqs[k], v)
				}
			}
		case karpv1.CapacityTypeSpot:
			spot++
			if _, pinned := reqs[karpv1.LabelCapacityReservationID]; pinned {
				t.Errorf("a spot NodeClaim names a reservation: %v", reqs)
			}
		}
	}
	if reserved != 2 || spot != 2 {
		t.Fatalf("reserved %d, spot %d NodeClaims; want the reservation's room (2) filled first, then spot (2)", reserved, spot)
	}
}

// TestAnInterruptedReservationIsLeftOut: once a capacity reservation takes its instances back
// (an interruptible reservation interrupted), its reserved offering is not available, while
// another reservation of the same type and zone stays available.
func TestAnInterruptedReservationIsLeftOut(t *testing.T) {
	e := emulator
	ctx := context.Background()
	r := resolver(t, e, "local")
	nc := readyNodeClass(t, r, "reserve-03")
	zone := nc.Status.Subnets[0].Zone
	for _, id := range []string{"cr-0interrupted", "cr-0other"} {
		nc.Status.CapacityReservations = append(nc.Status.CapacityReservations, awsv1.CapacityReservation{ID: id, InstanceType: "m5.large",
			AvailabilityZone: zone, OwnerID: "012345678901", InstanceMatchCriteria: "targeted", ReservationType: awsv1.CapacityReservationTypeDefault,
			State: awsv1.CapacityReservationStateActive})
	}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	clients, pricing, types := providers(t, e)
	p := aws.NewProvider(kube, aws.Settings{ClusterName: "local", Region: e.Region, KubernetesVersion: "1.37"}, clients, types, pricing)
	p.ReservationRoom = func(string) int { return 2 }
	np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: claimFor(nc.Name).Spec.NodeClassRef}}}}
	available := func() map[string]bool {
		its, err := p.GetInstanceTypes(ctx, np)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, o := range byName(its)["m5.large"].Offerings {
			if o.CapacityType == karpv1.CapacityTypeReserved {
				out[o.ReservationID] = o.Available
			}
		}
		return out
	}
	if got := available(); !got["cr-0interrupted"] || !got["cr-0other"] {
		t.Fatalf("reserved offerings available before the interruption: %v; want both", got)
	}
	p.MarkReservationUnavailable("cr-0interrupted")
	if got := available(); got["cr-0interrupted"] || !got["cr-0other"] {
		t.Errorf("reserved offerings available after cr-0interrupted was interrupted: %v; want cr-0other only", got)
	}
}

package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// withReservation adds a reserved offering of room instances in zone z-a, priced as a
// reservation is (next to nothing, docs/architecture.md "Reserved capacity").
func withReservation(it *cloudprovider.InstanceType, id string, room int) *cloudprovider.InstanceType {
	it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved,
		Price: 0.096 / 1e7, Available: room > 0, ReservationID: id, ReservationCapacity: room})
	return it
}

func TestReservedCapacityIsChosenFirstWhileItHasRoom(t *testing.T) {
	anyCapacity := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}}}
	}
	for name, tc := range map[string]struct {
		room         int
		pods         int
		wantReserved int
		wantOnDemand int
		onlyOnDemand bool
	}{
		"room for all":                          {room: 5, pods: 3, wantReserved: 3},
		"room for two of five":                  {room: 2, pods: 5, wantReserved: 2, wantOnDemand: 3},
		"no room left":                          {room: 0, pods: 2, wantOnDemand: 2},
		"a NodePool that allows only on-demand": {room: 5, pods: 2, wantOnDemand: 2, onlyOnDemand: true},
	} {
		t.Run(name, func(t *testing.T) {
			types := []*cloudprovider.InstanceType{withReservation(itype("m5.large", "amd64", 2, 8, 0.096), "cr-0123", tc.room), itype("m5.xlarge", "amd64", 4, 16, 0.192)}
			np := nodePool("default", anyCapacity)
			if tc.onlyOnDemand {
				np = nodePool("default")
			}
			// Each pod fills an m5.large, so every pod needs a NodeClaim of its own.
			r := solve(t, &Input{Pods: pods("app", tc.pods, "1500m", "2Gi"), NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
			reserved, onDemand := 0, 0
			for _, c := range r.NodeClaims {
				switch c.Offering.CapacityType {
				case karpv1.CapacityTypeReserved:
					reserved++
					if c.Offering.ReservationID != "cr-0123" || c.Offering.Zone != "z-a" || c.InstanceType.Name != "m5.large" {
						t.Errorf("reserved NodeClaim on %s %+v", c.InstanceType.Name, c.Offering)
					}
				case karpv1.CapacityTypeOnDemand:
					onDemand++
				}
			}
			if reserved != tc.wantReserved || onDemand != tc.wantOnDemand {
				t.Fatalf("reserved %d, on-demand %d; want %d and %d", reserved, onDemand, tc.wantReserved, tc.wantOnDemand)
			}
		})
	}
}

// A freed reservation slot is room, in a reservation the cloud provider reports full too: the
// pod needing the reservation places only with it, and only one pod takes it.
func TestFreedReservationsAreRoom(t *testing.T) {
	onlyReserved := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved}}}
	}
	for name, tc := range map[string]struct {
		room, freed, pods, wantReserved int
	}{
		"full, nothing freed":          {room: 0, freed: 0, pods: 1, wantReserved: 0},
		"full, one freed":              {room: 0, freed: 1, pods: 2, wantReserved: 1},
		"one left and one freed":       {room: 1, freed: 1, pods: 3, wantReserved: 2},
		"freed in another reservation": {room: 0, freed: -1, pods: 1, wantReserved: 0},
	} {
		t.Run(name, func(t *testing.T) {
			types := []*cloudprovider.InstanceType{withReservation(itype("m5.large", "amd64", 2, 8, 0.096), "cr-0123", tc.room)}
			freed := map[string]int{"cr-0123": tc.freed}
			if tc.freed < 0 {
				freed = map[string]int{"cr-other": 1}
			}
			r := solve(t, &Input{Pods: pods("app", tc.pods, "1500m", "2Gi"), FreedReservations: freed,
				NodePools: []*NodePool{{NodePool: nodePool("default", onlyReserved), InstanceTypes: types}}})
			reserved := 0
			for _, c := range r.NodeClaims {
				if c.Offering.ReservationID == "cr-0123" {
					reserved++
				}
			}
			if reserved != tc.wantReserved || len(r.Unschedulable) != tc.pods-tc.wantReserved {
				t.Fatalf("%d reserved NodeClaims, %d pods unschedulable; want %d and %d", reserved, len(r.Unschedulable), tc.wantReserved, tc.pods-tc.wantReserved)
			}
		})
	}
}

// A NodePool that launches only into a reservation, with more pods than the reservation has
// room for: as many NodeClaims as the room, each with its type and offering, and the other pods
// unschedulable. (Placement counted the room without taking it, and the NodeClaims past it
// came back with no instance type, which the provisioner could not launch.)
func TestReservationRoomIsNotOverCommitted(t *testing.T) {
	onlyReserved := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved}}}
	}
	for room := 1; room <= 3; room++ {
		types := []*cloudprovider.InstanceType{withReservation(itype("m5.large", "amd64", 2, 8, 0.096), "cr-0123", room)}
		r := solve(t, &Input{Pods: pods("app", 4, "1500m", "2Gi"), NodePools: []*NodePool{{NodePool: nodePool("default", onlyReserved), InstanceTypes: types}}})
		for _, c := range r.NodeClaims {
			if c.InstanceType == nil || len(c.InstanceTypes) == 0 || c.Offering.ReservationID != "cr-0123" {
				t.Errorf("room %d: a NodeClaim with type %v (%d types), offering %+v", room, c.InstanceType, len(c.InstanceTypes), c.Offering)
			}
		}
		if len(r.NodeClaims) != room || len(r.Unschedulable) != 4-room {
			t.Errorf("room %d: %d NodeClaims and %d pods unschedulable, want %d and %d", room, len(r.NodeClaims), len(r.Unschedulable), room, 4-room)
		}
	}
}

// Upstream's capacity reservation cases: reserved offerings win while they have room, within
// what the pods and the NodePool allow (zone, capacity type). Pods selecting a reservation by
// its karpenter.k8s.aws/capacity-reservation-id label are not placed into it yet: the AWS
// provider's reservation discovery (issue 51) brings that label to offerings.
func TestReservedCapacityCases(t *testing.T) {
	anyCapacity := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot}}}
	}
	catalog := func() []*cloudprovider.InstanceType {
		return []*cloudprovider.InstanceType{
			withReservation(itype("m5.large", "amd64", 2, 8, 0.096), "cr-a", 2),
			itype("m5.xlarge", "amd64", 4, 16, 0.192),
			itype("c5.large", "amd64", 2, 4, 0.085),
		}
	}
	for name, tc := range map[string]struct {
		pods      []*corev1.Pod
		reserved  int
		notInZone string
		because   string
	}{
		"reserved before Spot and on-demand":    {pods: pods("w", 1, "1", "1Gi"), reserved: 1},
		"two pods, room for two":                {pods: pods("w", 2, "1500m", "1Gi"), reserved: 2},
		"three pods, room for two":              {pods: pods("w", 3, "1500m", "1Gi"), reserved: 2},
		"a pod in another zone does not fit":    {pods: pods("w", 1, "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-b")), reserved: 0, notInZone: "z-a"},
		"a pod that asks for reserved only":     {pods: pods("w", 3, "1500m", "1Gi", selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeReserved)), reserved: 2, because: "reservation"},
		"a pod too large for the reserved type": {pods: pods("w", 1, "3", "1Gi"), reserved: 0},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: tc.pods, NodePools: []*NodePool{{NodePool: nodePool("default", anyCapacity), InstanceTypes: catalog()}}})
			reserved := 0
			for _, c := range r.NodeClaims {
				if c.Offering.ReservationID != "" {
					reserved++
					if c.Offering.CapacityType != karpv1.CapacityTypeReserved || c.InstanceType.Name != "m5.large" {
						t.Errorf("reserved NodeClaim %s %+v", c.InstanceType.Name, c.Offering)
					}
				}
				if tc.notInZone != "" && c.Offering.Zone == tc.notInZone {
					t.Errorf("a NodeClaim in %s", c.Offering.Zone)
				}
			}
			if reserved != tc.reserved {
				t.Fatalf("%d reserved NodeClaims, want %d", reserved, tc.reserved)
			}
			if tc.because != "" {
				expectUnschedulable(t, r, tc.because)
			} else {
				expectPlaced(t, r)
			}
		})
	}
}

package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func offeringsCatalog() []*cloudprovider.InstanceType {
	mk := func(name, arch, cpu string, offs ...cloudprovider.Offering) *cloudprovider.InstanceType {
		return &cloudprovider.InstanceType{Name: name, Labels: map[string]string{corev1.LabelArchStable: arch, karpv1.LabelInstanceType: name},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")}, Offerings: offs}
	}
	od := func(z string, p float64) cloudprovider.Offering {
		return cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: p, Available: true}
	}
	spot := func(z string, p float64, avail bool) cloudprovider.Offering {
		return cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: p, Available: avail}
	}
	return []*cloudprovider.InstanceType{
		mk("b.large", "amd64", "2", od("z-a", 0.10), od("z-b", 0.10), spot("z-a", 0.03, false), spot("z-b", 0.04, true)),
		mk("a.large", "arm64", "2", od("z-a", 0.10), spot("z-a", 0.04, true)),
		mk("c.xlarge", "amd64", "4", od("z-a", 0.20), spot("z-b", 0.05, true),
			cloudprovider.Offering{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved, Price: 0.00000002, Available: true, ReservationID: "cr-1", ReservationCapacity: 1}),
	}
}

func TestOfferingsCheapestFirstWithStableTies(t *testing.T) {
	its := offeringsCatalog()
	all := Offerings(its, Requirements{}, nil, Available)
	var got []string
	for _, l := range all {
		got = append(got, l.InstanceType.Name+"/"+l.Offering.Zone+"/"+l.Offering.CapacityType)
	}
	want := []string{"c.xlarge/z-a/reserved", "a.large/z-a/spot", "b.large/z-b/spot", "c.xlarge/z-b/spot",
		"a.large/z-a/on-demand", "b.large/z-a/on-demand", "b.large/z-b/on-demand", "c.xlarge/z-a/on-demand"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	// Without the availability filter the unavailable Spot offering counts (what a node costs).
	if l, _ := CheapestOffering(its, Requirements{}, nil, nil); l.InstanceType.Name != "c.xlarge" {
		t.Errorf("cheapest of all: %s", l.InstanceType.Name)
	}
}

func TestOfferingsFollowRequirementsAndRequests(t *testing.T) {
	its := offeringsCatalog()
	for name, tc := range map[string]struct {
		reqs     Requirements
		requests corev1.ResourceList
		want     string
	}{
		"arch": {Requirements{corev1.LabelArchStable: NewRequirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
			karpv1.LabelCapacityReservationID: NewRequirement(karpv1.LabelCapacityReservationID, corev1.NodeSelectorOpDoesNotExist)}, nil, "b.large/z-b/spot"},
		"on-demand in z-b": {Requirements{karpv1.CapacityTypeLabelKey: NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
			karpv1.LabelTopologyZone: NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b")}, nil, "b.large/z-b/on-demand"},
		"requests too big for the large types": {Requirements{karpv1.CapacityTypeLabelKey: NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot)},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}, "c.xlarge/z-b/spot"},
		"the reservation by id":    {Requirements{karpv1.LabelCapacityReservationID: NewRequirement(karpv1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, "cr-1")}, nil, "c.xlarge/z-a/reserved"},
		"an instance type by name": {Requirements{karpv1.LabelInstanceType: NewRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpNotIn, "a.large", "c.xlarge")}, nil, "b.large/z-b/spot"},
		// A well-known label no type defines must be allowed absent; a custom one is a label
		// the node will get.
		"a well-known key the types lack": {Requirements{karpv1.LabelInstanceGPUName: NewRequirement(karpv1.LabelInstanceGPUName, corev1.NodeSelectorOpIn, "a100")}, nil, ""},
		"a custom label": {Requirements{"team": NewRequirement("team", corev1.NodeSelectorOpIn, "a"),
			karpv1.LabelCapacityReservationID: NewRequirement(karpv1.LabelCapacityReservationID, corev1.NodeSelectorOpDoesNotExist)}, nil, "a.large/z-a/spot"},
	} {
		t.Run(name, func(t *testing.T) {
			l, ok := CheapestOffering(its, tc.reqs, tc.requests, Available)
			got := ""
			if ok {
				got = l.InstanceType.Name + "/" + l.Offering.Zone + "/" + l.Offering.CapacityType
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if all := Offerings(its, tc.reqs, tc.requests, Available); ok != (len(all) > 0) || ok && all[0] != l {
				t.Errorf("CheapestOffering and Offerings[0] differ: %v / %v", l, all)
			}
			if tc.requests == nil && AnyOffering(its, tc.reqs, Available) != ok {
				t.Errorf("AnyOffering = %v, want %v", !ok, ok)
			}
		})
	}
}

func TestNodePrice(t *testing.T) {
	its := offeringsCatalog()
	for _, tc := range []struct {
		labels map[string]string
		price  float64
		ok     bool
	}{
		{map[string]string{karpv1.LabelInstanceType: "b.large", karpv1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot}, 0.03, true},
		// Its zone is not offered (any more): the cheapest of its capacity type.
		{map[string]string{karpv1.LabelInstanceType: "b.large", karpv1.LabelTopologyZone: "z-q", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}, 0.10, true},
		{map[string]string{karpv1.LabelInstanceType: "c.xlarge", karpv1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved,
			karpv1.LabelCapacityReservationID: "cr-1"}, 0.00000002, true},
		{map[string]string{karpv1.LabelInstanceType: "x.huge"}, 0, false},
		{map[string]string{}, 0, false},
	} {
		if p, ok := NodePrice(its, tc.labels); p != tc.price || ok != tc.ok {
			t.Errorf("NodePrice(%v) = %v %v, want %v %v", tc.labels, p, ok, tc.price, tc.ok)
		}
	}
}

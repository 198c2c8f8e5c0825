package cloudprovider

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTypedErrorsSurviveWrapping(t *testing.T) {
	base := errors.New("boom")
	for name, tc := range map[string]struct {
		err    error
		is     func(error) bool
		others []func(error) bool
	}{
		"not found": {err: NewNodeClaimNotFoundError(base), is: IsNodeClaimNotFoundError, others: []func(error) bool{IsInsufficientCapacityError, IsNodeClassNotReadyError}},
		"ice":       {err: NewInsufficientCapacityError(base), is: IsInsufficientCapacityError, others: []func(error) bool{IsNodeClaimNotFoundError, IsNodeClassNotReadyError}},
		"not ready": {err: NewNodeClassNotReadyError(base), is: IsNodeClassNotReadyError, others: []func(error) bool{IsNodeClaimNotFoundError, IsInsufficientCapacityError}},
	} {
		t.Run(name, func(t *testing.T) {
			wrapped := fmt.Errorf("launching nodeclaim a: %w", tc.err)
			if !tc.is(wrapped) {
				t.Fatalf("%v: the Is helper does not see through wrapping", wrapped)
			}
			for _, other := range tc.others {
				if other(wrapped) {
					t.Fatalf("%v: matched another error type", wrapped)
				}
			}
			if !errors.Is(wrapped, base) {
				t.Fatalf("%v: the cause is lost", wrapped)
			}
		})
	}
}

func TestAllocatableAndOfferings(t *testing.T) {
	it := &InstanceType{
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("80m"), corev1.ResourceMemory: resource.MustParse("9Gi")},
		Offerings: Offerings{
			{Zone: "a", CapacityType: "on-demand", Price: 0.096, Available: true},
			{Zone: "a", CapacityType: "spot", Price: 0.03, Available: false},
			{Zone: "b", CapacityType: "spot", Price: 0.035, Available: true},
		},
	}
	a := it.Allocatable()
	if got := a.Cpu().MilliValue(); got != 1920 {
		t.Errorf("allocatable cpu = %dm, want 1920m", got)
	}
	if got := a.Memory().Value(); got != 0 {
		t.Errorf("allocatable memory = %d, want 0 (overhead above capacity floors at zero)", got)
	}
	best, ok := it.Offerings.Available().Cheapest()
	if !ok || best.Zone != "b" || best.CapacityType != "spot" {
		t.Errorf("cheapest available = %+v, want the zone b spot offering", best)
	}
	if _, ok := Offerings(nil).Cheapest(); ok {
		t.Error("no offerings must have no cheapest")
	}
}

// The one price rule orders by price, then instance type, zone, capacity type and
// reservation, and says 0 only for the same offering; Cheapest agrees with it on ties.
func TestCompareOfferings(t *testing.T) {
	od := func(zone string, price float64) Offering {
		return Offering{Zone: zone, CapacityType: "on-demand", Price: price, Available: true}
	}
	for _, tc := range []struct {
		ta    string
		a     Offering
		tb    string
		b     Offering
		order int
	}{
		{"m5.large", od("a", 0.1), "c5.large", od("a", 0.2), -1},
		{"m5.large", od("a", 0.2), "c5.large", od("a", 0.2), 1},
		{"m5.large", od("b", 0.2), "m5.large", od("a", 0.2), 1},
		{"m5.large", Offering{Zone: "a", CapacityType: "spot", Price: 0.2}, "m5.large", od("a", 0.2), 1},
		{"m5.large", Offering{Zone: "a", CapacityType: "reserved", ReservationID: "cr-2"}, "m5.large", Offering{Zone: "a", CapacityType: "reserved", ReservationID: "cr-1"}, 1},
		{"m5.large", od("a", 0.2), "m5.large", od("a", 0.2), 0},
	} {
		if got := CompareOfferings(tc.ta, tc.a, tc.tb, tc.b); got != tc.order || CompareOfferings(tc.tb, tc.b, tc.ta, tc.a) != -tc.order {
			t.Errorf("%s %+v vs %s %+v: %d, want %d (and its opposite)", tc.ta, tc.a, tc.tb, tc.b, got, tc.order)
		}
	}
	if o, _ := (Offerings{od("c", 0.1), od("a", 0.1), od("b", 0.1)}).Cheapest(); o.Zone != "a" {
		t.Errorf("Cheapest of three at one price: zone %s, want a", o.Zone)
	}
}

// The priced offering reads back as written; bad values are errors naming the annotation.
func TestPricedOfferingRoundTrip(t *testing.T) {
	for _, p := range []PricedOffering{
		{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0345},
		{InstanceType: "p5.48xlarge", Zone: "us-east-1b", CapacityType: "reserved", ReservationID: "cr-0123", Price: 9.8e-6},
	} {
		got, err := ParsePricedOffering(p.String())
		if err != nil || got != p {
			t.Errorf("%s read back as %+v (%v)", p, got, err)
		}
	}
	for _, bad := range []string{"", "m5.large/us-east-1a/spot", "m5.large/us-east-1a@0.1", "m5.large/a/spot@-1", "m5.large/a/spot@x", "a/b/c/d/e@1"} {
		if _, err := ParsePricedOffering(bad); err == nil || !strings.Contains(err.Error(), PricedOfferingAnnotation) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

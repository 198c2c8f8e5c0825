package cloudprovider

import (
	"errors"
	"fmt"
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

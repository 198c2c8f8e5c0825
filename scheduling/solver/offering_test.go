package solver

import (
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The solver's inner loops pick offerings through interned bit masks; the offering a NodeClaim
// launches with comes from scheduling.CheapestOffering. Both must give the same answer for
// any requirements, availability and reservation room, or the solver would plan with one
// price and launch with another.
func TestOneCheapestOffering(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	zones := []string{"z-a", "z-b", "z-c"}
	cts := []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}
	pick := func(vals []string) []string {
		var out []string
		for _, v := range vals {
			if r.Intn(2) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	for i := range 2000 {
		s := &solver{in: &Input{}, intern: newInterner(), reserved: reservations{}}
		it := &cloudprovider.InstanceType{Name: "t", Labels: map[string]string{corev1.LabelArchStable: "amd64"}}
		for _, z := range zones {
			for _, ct := range cts {
				if r.Intn(3) == 0 {
					continue
				}
				o := cloudprovider.Offering{Zone: z, CapacityType: ct, Price: float64(r.Intn(4)), Available: r.Intn(4) != 0}
				if ct == karpv1.CapacityTypeReserved {
					o.ReservationID, o.ReservationCapacity = "cr-"+z, r.Intn(2)
				}
				it.Offerings = append(it.Offerings, o)
			}
		}
		pt := s.prepareType(it)
		if pt == nil {
			continue
		}
		reqs := scheduling.Requirements{}
		if vs := pick(zones); len(vs) > 0 {
			reqs[karpv1.LabelTopologyZone] = scheduling.NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, vs...)
		}
		if vs := pick(cts); r.Intn(2) == 0 {
			reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, vs...)
		}
		fast, okFast := pt.cheapestOffering(reqs, nil)
		one, okOne := scheduling.CheapestOffering([]*cloudprovider.InstanceType{it}, reqs, nil, pt.allows(nil))
		if okFast != okOne || okFast && (fast.Price != one.Offering.Price || fast.Zone != one.Offering.Zone || fast.CapacityType != one.Offering.CapacityType) {
			t.Fatalf("case %d: reqs %v over %+v: the solver picks %+v (%v), scheduling %+v (%v)", i, reqs, it.Offerings, fast, okFast, one.Offering, okOne)
		}
	}
}

package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Launchable is an instance type in one of its offerings: what a launch buys.
type Launchable struct {
	InstanceType *cloudprovider.InstanceType
	Offering     cloudprovider.Offering
}

// offeringKeys are the requirement keys an offering, not its instance type, decides.
var offeringKeys = map[string]bool{karpv1.LabelTopologyZone: true, karpv1.CapacityTypeLabelKey: true, karpv1.LabelCapacityReservationID: true}

// IsOfferingKey reports whether an offering, not its instance type, decides a label: the
// zone, the capacity type and the capacity reservation.
func IsOfferingKey(key string) bool { return offeringKeys[key] }

// AllowsType reports whether the requirements allow an instance type, the offering keys
// (zone, capacity type, reservation) aside: every key its labels define must keep a value the
// requirements allow, and a well-known key it does not define must allow absence; any other
// key is a label the node will be given.
func AllowsType(reqs Requirements, it *cloudprovider.InstanceType) bool {
	for key, r := range reqs {
		if offeringKeys[key] {
			continue
		}
		if key == karpv1.LabelInstanceType || key == corev1.LabelInstanceType {
			if !r.Has(it.Name) {
				return false
			}
			continue
		}
		if v, ok := it.Labels[key]; ok {
			if !r.Has(v) {
				return false
			}
			continue
		}
		if karpv1.WellKnownLabels.Has(key) && key != karpv1.NodePoolLabelKey && !r.AllowsAbsent() {
			return false
		}
	}
	return true
}

// AllowsOffering reports whether the requirements allow an offering's zone, capacity type and
// capacity reservation.
func AllowsOffering(reqs Requirements, o cloudprovider.Offering) bool {
	if r, ok := reqs[karpv1.LabelTopologyZone]; ok && !r.Has(o.Zone) {
		return false
	}
	if r, ok := reqs[karpv1.CapacityTypeLabelKey]; ok && !r.Has(o.CapacityType) {
		return false
	}
	if r, ok := reqs[karpv1.LabelCapacityReservationID]; ok {
		if o.ReservationID == "" {
			return r.AllowsAbsent()
		}
		return r.Has(o.ReservationID)
	}
	return true
}

// OfferingFilter keeps the offerings a caller may use besides what the requirements allow;
// nil keeps them all.
type OfferingFilter func(*cloudprovider.InstanceType, cloudprovider.Offering) bool

// Available keeps the offerings the cloud has capacity for now: what a launch may buy. Without
// it, unavailable offerings count too (what a running node costs).
func Available(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool { return o.Available }

// Offerings are the offerings that the requirements and the filter allow, of the instance
// types the requirements allow and whose allocatable holds requests (nil: any), cheapest
// first; ties go by instance type name, then zone and capacity type, so that every caller
// picks the same. It is the one answer to "the cheapest offering a set of requirements
// allows": the solver (for the offering a NodeClaim launches with), the cluster state (what an
// in-flight NodeClaim will cost), the planner (what a node costs) and both providers (what
// they launch) all ask it.
func Offerings(its []*cloudprovider.InstanceType, reqs Requirements, requests corev1.ResourceList, keep OfferingFilter) []Launchable {
	var out []Launchable
	for _, it := range its {
		if !AllowsType(reqs, it) {
			continue
		}
		if len(requests) > 0 {
			if ok, _ := Fits(requests, it.Allocatable()); !ok {
				continue
			}
		}
		for _, o := range it.Offerings {
			if AllowsOffering(reqs, o) && (keep == nil || keep(it, o)) {
				out = append(out, Launchable{InstanceType: it, Offering: o})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return cheaper(out[i], out[j]) })
	return out
}

// LaunchOffers is the order a provider tries a NodeClaim's offerings in: those of its
// instance types its requirements allow and keep keeps, whose allocatable holds its requests,
// by the one price rule, but with the offering the solver priced it at
// (cloudprovider.PricedOfferingAnnotation) first. priced is false when that offering is not
// among them (gone from the catalog, unavailable, or refused by keep); the provider says so
// (cloudprovider.LaunchDeviationAnnotation) if it launches.
func LaunchOffers(its []*cloudprovider.InstanceType, nc *karpv1.NodeClaim, keep OfferingFilter) (offers []Launchable, priced bool) {
	offers = Offerings(its, NewRequirements(nc.Spec.Requirements...), nc.Spec.Resources.Requests, keep)
	p, ok := cloudprovider.PricedOfferingOf(nc)
	if !ok {
		return offers, false
	}
	for i, l := range offers {
		if p.Is(l.InstanceType.Name, l.Offering) {
			copy(offers[1:i+1], offers[:i])
			offers[0] = l
			return offers, true
		}
	}
	return offers, false
}

// Deviation says why a NodeClaim launched as l and not as its priced offering; "" when it
// launched as priced or has no priced offering.
func Deviation(nc *karpv1.NodeClaim, l Launchable, why string) string {
	p, ok := cloudprovider.PricedOfferingOf(nc)
	if !ok || p.Is(l.InstanceType.Name, l.Offering) {
		return ""
	}
	return fmt.Sprintf("priced %s, launched %s: %s", p, cloudprovider.Priced(l.InstanceType.Name, l.Offering), why)
}

// AnyOffering reports whether Offerings would return any, stopping at the first.
func AnyOffering(its []*cloudprovider.InstanceType, reqs Requirements, keep OfferingFilter) bool {
	for _, it := range its {
		if !AllowsType(reqs, it) {
			continue
		}
		for _, o := range it.Offerings {
			if AllowsOffering(reqs, o) && (keep == nil || keep(it, o)) {
				return true
			}
		}
	}
	return false
}

// CheapestOffering is the first of Offerings, without sorting them all.
func CheapestOffering(its []*cloudprovider.InstanceType, reqs Requirements, requests corev1.ResourceList, keep OfferingFilter) (Launchable, bool) {
	var best Launchable
	found := false
	for _, it := range its {
		if !AllowsType(reqs, it) {
			continue
		}
		if len(requests) > 0 {
			if ok, _ := Fits(requests, it.Allocatable()); !ok {
				continue
			}
		}
		for _, o := range it.Offerings {
			if AllowsOffering(reqs, o) && (keep == nil || keep(it, o)) {
				if l := (Launchable{InstanceType: it, Offering: o}); !found || cheaper(l, best) {
					best, found = l, true
				}
			}
		}
	}
	return best, found
}

// cheaper is cloudprovider.CompareOfferings over launchables.
func cheaper(a, b Launchable) bool { return Compare(a, b) < 0 }

// Compare orders launchables by the one price rule, cloudprovider.CompareOfferings.
func Compare(a, b Launchable) int {
	return cloudprovider.CompareOfferings(a.InstanceType.Name, a.Offering, b.InstanceType.Name, b.Offering)
}

// NodePrice is what a running node with these labels costs per hour, from the instance types
// that may describe it: the offering its instance type, zone and capacity type (CapacityTypeOf:
// on-demand when no label says) and capacity reservation name, or, when its zone is not among
// them, the cheapest of its capacity type. False when no instance type is named or known.
func NodePrice(its []*cloudprovider.InstanceType, labels map[string]string) (float64, bool) {
	name := labels[corev1.LabelInstanceTypeStable]
	if name == "" {
		return 0, false
	}
	reqs := Requirements{karpv1.LabelInstanceType: NewRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, name)}
	for _, k := range []string{karpv1.LabelCapacityReservationID, karpv1.LabelTopologyZone} {
		if v, ok := labels[k]; ok {
			reqs[k] = NewRequirement(k, corev1.NodeSelectorOpIn, v)
		}
	}
	ct, _ := CapacityTypeOf(labels)
	reqs[karpv1.CapacityTypeLabelKey] = NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, ct)
	if l, ok := CheapestOffering(its, reqs, nil, nil); ok {
		return l.Offering.Price, true
	}
	delete(reqs, karpv1.LabelTopologyZone)
	if l, ok := CheapestOffering(its, reqs, nil, nil); ok {
		return l.Offering.Price, true
	}
	return 0, false
}

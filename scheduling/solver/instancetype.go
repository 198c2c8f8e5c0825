package solver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

type pool struct {
	np        *karpv1.NodePool
	name      string
	reqs      scheduling.Requirements
	taints    []corev1.Taint
	types     []*instanceType
	overhead  corev1.ResourceList
	remaining corev1.ResourceList // nil: no limits
	excluded  string              // why no instance type is left, if none
	// typeKeys are the label keys its instance types define (zone and capacity type included).
	typeKeys sets.Set[string]
}

type instanceType struct {
	it    *cloudprovider.InstanceType
	reqs  scheduling.Requirements
	alloc res
	// zones and capacityTypes of its available offerings, as names and as bits of in.
	zones, capacityTypes sets.Set[string]
	zoneMask, ctMask     uint64
	// offerings are the available ones, cheapest first, with their zone and capacity-type bits.
	offerings          []cloudprovider.Offering
	offerZone, offerCT []uint64
	in                 *interner
	// reserved is the solve's ledger of capacity reservations, shared by every type.
	reserved reservations
	// idx numbers the solve's instance types (a type in two NodePools counts twice).
	idx int
}

// reservations is how many more NodeClaims each capacity reservation can take in this solve:
// its ReservationCapacity, less the NodeClaims finalize has given it.
type reservations map[string]int

// has reports whether the offering may be chosen: it is not reserved, or its reservation has
// room left.
func (r reservations) has(o *cloudprovider.Offering) bool {
	return o.ReservationID == "" || r[o.ReservationID] > 0
}

// interner numbers the zones and capacity types of a solve, so that the inner loops test
// offerings with bit masks instead of looking names up in requirement sets. Requirements
// are immutable once built, so each one's mask is computed once.
type interner struct {
	zones, cts map[string]uint64
	masks      map[*scheduling.Requirement]uint64
}

func newInterner() *interner {
	return &interner{zones: map[string]uint64{}, cts: map[string]uint64{}, masks: map[*scheduling.Requirement]uint64{}}
}

// bit numbers a name; past 64 names every further one shares the last bit, which only makes
// masks allow more, never less (candidates are checked against the names again). A new name
// drops the masks computed so far: they were computed without it, and a requirement that
// allows it would otherwise keep a mask that does not (a pool's first types may offer only
// some capacity types, as when disruption keeps only the offerings cheaper than a node).
func (in *interner) bit(m map[string]uint64, name string) uint64 {
	if b, ok := m[name]; ok {
		return b
	}
	b := uint64(1) << min(len(m), 63)
	m[name] = b
	clear(in.masks)
	return b
}

// mask is the set of known names r allows; all bits for no requirement.
func (in *interner) mask(r *scheduling.Requirement, names map[string]uint64) uint64 {
	if r == nil {
		return ^uint64(0)
	}
	if m, ok := in.masks[r]; ok {
		return m
	}
	var m uint64
	for name, b := range names {
		if r.Has(name) {
			m |= b
		}
	}
	in.masks[r] = m
	return m
}

// exact reports whether masks decide alone: fewer than 64 zones and capacity types.
func (in *interner) exact() bool { return len(in.zones) < 64 && len(in.cts) < 64 }

// compatible checks the given keys of reqs against what the type defines: its labels, and
// the zones and capacity types of its offerings. A key it does not define must allow absence.
func (t *instanceType) compatible(reqs scheduling.Requirements, keys []string) error {
	if r := t.incompatible(reqs, keys); r != nil {
		return fmt.Errorf("%s, but %s does not offer it", r, t.it.Name)
	}
	return nil
}

func allowedType(t *instanceType, filters []func(*cloudprovider.InstanceType) bool) bool {
	for _, f := range filters {
		if !f(t.it) {
			return false
		}
	}
	return true
}

// incompatible is the first of the requirements on keys the type does not meet; nil when it
// meets them all. It allocates nothing, for the solver's inner loops.
func (t *instanceType) incompatible(reqs scheduling.Requirements, keys []string) *scheduling.Requirement {
	for _, k := range keys {
		r, ok := reqs[k]
		if !ok {
			continue
		}
		var allowed bool
		switch k {
		case karpv1.LabelTopologyZone:
			if t.in.exact() {
				allowed = t.zoneMask&t.in.mask(r, t.in.zones) != 0
			} else {
				allowed = anyOf(t.zones, r)
			}
		case karpv1.CapacityTypeLabelKey:
			if t.in.exact() {
				allowed = t.ctMask&t.in.mask(r, t.in.cts) != 0
			} else {
				allowed = anyOf(t.capacityTypes, r)
			}
		default:
			if v, defined := t.it.Labels[k]; defined {
				allowed = r.Has(v)
			} else {
				allowed = r.AllowsAbsent()
			}
		}
		if !allowed {
			return r
		}
	}
	return nil
}

// keyCheck is one requirement to check instance types against, with the zone or
// capacity-type mask worked out once for a loop over types.
type keyCheck struct {
	key  string
	r    *scheduling.Requirement
	mask uint64
	kind int // 0 label, 1 zone, 2 capacity type
}

// checks prepares the requirements on keys for failing; with more than 64 zones or capacity
// types it leaves them to incompatible.
func (in *interner) checks(reqs scheduling.Requirements, keys []string) ([]keyCheck, bool) {
	if !in.exact() {
		return nil, false
	}
	out := make([]keyCheck, 0, len(keys))
	for _, k := range keys {
		r, ok := reqs[k]
		if !ok {
			continue
		}
		c := keyCheck{key: k, r: r}
		switch k {
		case karpv1.LabelTopologyZone:
			c.kind, c.mask = 1, in.mask(r, in.zones)
		case karpv1.CapacityTypeLabelKey:
			c.kind, c.mask = 2, in.mask(r, in.cts)
		}
		out = append(out, c)
	}
	return out, true
}

// check is fails when the checks could be prepared, else incompatible.
func (t *instanceType) check(reqs scheduling.Requirements, keys []string, checks []keyCheck, exact bool) *scheduling.Requirement {
	if exact {
		return t.fails(checks)
	}
	return t.incompatible(reqs, keys)
}

// fails is incompatible with the checks prepared.
func (t *instanceType) fails(checks []keyCheck) *scheduling.Requirement {
	for _, c := range checks {
		var allowed bool
		switch c.kind {
		case 1:
			allowed = t.zoneMask&c.mask != 0
		case 2:
			allowed = t.ctMask&c.mask != 0
		default:
			if v, defined := t.it.Labels[c.key]; defined {
				allowed = c.r.Has(v)
			} else {
				allowed = c.r.AllowsAbsent()
			}
		}
		if !allowed {
			return c.r
		}
	}
	return nil
}

func anyOf(values sets.Set[string], r *scheduling.Requirement) bool {
	for v := range values {
		if r.Has(v) {
			return true
		}
	}
	return false
}

// cheapestOffering is the cheapest available offering of the type that reqs and filters allow.
func (t *instanceType) cheapestOffering(reqs scheduling.Requirements, filters []*offerFilter) (cloudprovider.Offering, bool) {
	return t.cheapestOfferingSel(t.in.sel(reqs), filters)
}

// offerSel is what requirements allow of offerings, computed once for a loop over types.
type offerSel struct {
	zone, ct *scheduling.Requirement
	zm, cm   uint64
	exact    bool
}

func (in *interner) sel(reqs scheduling.Requirements) offerSel {
	zone, ct := reqs[karpv1.LabelTopologyZone], reqs[karpv1.CapacityTypeLabelKey]
	return offerSel{zone: zone, ct: ct, zm: in.mask(zone, in.zones), cm: in.mask(ct, in.cts), exact: in.exact()}
}

// cheapestOfferingSel is cheapestOffering with the requirements' selection made already.
func (t *instanceType) cheapestOfferingSel(sel offerSel, filters []*offerFilter) (cloudprovider.Offering, bool) {
	allowed := ^uint64(0)
	for _, f := range filters {
		allowed &= f.mask(t)
	}
next:
	for i, o := range t.offerings {
		if t.offerZone[i]&sel.zm == 0 || t.offerCT[i]&sel.cm == 0 {
			continue
		}
		if !sel.exact && ((sel.zone != nil && !sel.zone.Has(o.Zone)) || (sel.ct != nil && !sel.ct.Has(o.CapacityType))) {
			continue
		}
		if o.ReservationID != "" && !t.reserved.has(&t.offerings[i]) {
			continue
		}
		if i < 63 {
			if allowed&(1<<i) == 0 {
				continue
			}
		} else {
			for _, f := range filters {
				if !f.allow(t.it, o) {
					continue next
				}
			}
		}
		return o, true
	}
	return cloudprovider.Offering{}, false
}

// allows is what the solve lets this type launch as, besides the requirements: an available
// offering (the only ones the type keeps), with room left in its reservation, that every
// policy filter allows.
func (t *instanceType) allows(filters []*offerFilter) scheduling.OfferingFilter {
	return func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		if !o.Available || !t.reserved.has(&o) {
			return false
		}
		for _, f := range filters {
			if !f.allow(it, o) {
				return false
			}
		}
		return true
	}
}

// cheapestType is the type whose cheapest offering the requirements and filters allow comes
// first by the one price rule.
func cheapestType(types []*instanceType, reqs scheduling.Requirements, filters []*offerFilter) *instanceType {
	var best *instanceType
	var bestOffering cloudprovider.Offering
	for _, t := range types {
		if o, ok := t.cheapestOffering(reqs, filters); ok && (best == nil || cloudprovider.CompareOfferings(t.it.Name, o, best.it.Name, bestOffering) < 0) {
			best, bestOffering = t, o
		}
	}
	return best
}

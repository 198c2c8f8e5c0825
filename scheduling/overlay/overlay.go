// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to a NodePool's instance types:
// it changes the price of the offerings an overlay selects and adds the extended resources it
// names, so that the solver, disruption, the policy layer's dollars and karpenterctl all
// believe the same prices (docs/architecture.md, "NodeOverlays"). It orders overlays by weight,
// refuses invalid ones and resolves conflicts as upstream Karpenter does, and reports each
// overlay's verdict for its status. It is pure: no client, no clock, no provider; it never
// changes an instance type it is given, but returns copies of those it changes.
package overlay

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Reasons of a NodeOverlay's ValidationSucceeded condition when it is not applied.
const (
	ReasonRuntimeValidation = "RuntimeValidation"
	ReasonConflict          = "Conflict"
)

// restricted are the resources an overlay's capacity may not change.
var restricted = map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true,
	corev1.ResourceEphemeralStorage: true, corev1.ResourcePods: true}

// overlay is a NodeOverlay compiled for matching.
type overlay struct {
	name   string
	weight int32
	// typeReqs are on labels an instance type and its NodePool decide; offerReqs on those an
	// offering decides (zone, capacity type, capacity reservation), checked per offering.
	typeReqs, offerReqs []*scheduling.Requirement
	price               func(float64) float64
	capacity            corev1.ResourceList
}

// Problem is why an overlay is not applied: its condition's reason and message.
type Problem struct {
	Reason, Message string
}

// Pool is a NodePool with the instance types its provider offers, before overlays.
type Pool struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
}

// Set is the overlays that apply, in order (the highest weight first, then the name that
// sorts last), and the problem of each that does not.
type Set struct {
	overlays []*overlay
	// Problems are the overlays not applied, by name.
	Problems map[string]Problem
}

// Empty reports whether the set changes nothing.
func (s *Set) Empty() bool { return s == nil || len(s.overlays) == 0 }

// Validate checks what the CRD's schema cannot (upstream's runtime validation): each
// requirement's values against its operator, the resources capacity names, and that price and
// priceAdjustment parse and are not both set. The validating webhook, karpenterctl validate
// and Resolve give the same verdict.
func Validate(o *karpv1alpha1.NodeOverlay) field.ErrorList {
	_, errs := compile(o)
	return errs
}

// compile validates an overlay and turns it into a matcher and a price function.
func compile(o *karpv1alpha1.NodeOverlay) (*overlay, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	c := &overlay{name: o.Name, capacity: o.Spec.Capacity}
	reqs := scheduling.Requirements{}
	if o.Spec.Weight != nil {
		c.weight = *o.Spec.Weight
	}
	for i, r := range o.Spec.Requirements {
		if err := checkRequirement(r); err != nil {
			errs = append(errs, field.Invalid(spec.Child("requirements").Index(i), r.Key, err.Error()))
			continue
		}
		reqs.Add(scheduling.NewRequirement(r.Key, r.Operator, r.Values...))
	}
	for _, key := range reqs.Keys() {
		if scheduling.IsOfferingKey(key) {
			c.offerReqs = append(c.offerReqs, reqs[key])
		} else {
			c.typeReqs = append(c.typeReqs, reqs[key])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Spec.Capacity)) {
		if q := o.Spec.Capacity[name]; restricted[name] {
			errs = append(errs, field.Invalid(spec.Child("capacity").Key(string(name)), q.String(),
				"an overlay may add extended resources only, not cpu, memory, ephemeral-storage or pods"))
		}
	}
	switch {
	case o.Spec.Price != nil && o.Spec.PriceAdjustment != nil:
		errs = append(errs, field.Invalid(spec, "price and priceAdjustment", "cannot set both price and priceAdjustment"))
	case o.Spec.Price != nil:
		p, err := strconv.ParseFloat(*o.Spec.Price, 64)
		if err != nil || p < 0 || math.IsInf(p, 0) || math.IsNaN(p) {
			errs = append(errs, field.Invalid(spec.Child("price"), *o.Spec.Price, "not a price in USD per hour"))
		}
		c.price = func(float64) float64 { return p }
	case o.Spec.PriceAdjustment != nil:
		f, err := Adjustment(*o.Spec.PriceAdjustment)
		if err != nil {
			errs = append(errs, field.Invalid(spec.Child("priceAdjustment"), *o.Spec.PriceAdjustment, err.Error()))
		}
		c.price = f
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Adjustment parses a priceAdjustment: a signed amount ("+0.1", "-0.05") added to the price, or
// a signed percentage ("-30%", "+10%") of it; a price never goes below zero.
func Adjustment(s string) (func(float64) float64, error) {
	if len(s) < 2 || (s[0] != '+' && s[0] != '-') {
		return nil, fmt.Errorf("%q must start with + or -", s)
	}
	num, percent := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, fmt.Errorf("%q is not a signed amount or percentage", s)
	}
	if percent {
		if v < -100 {
			return nil, fmt.Errorf("%q lowers the price by more than 100%%", s)
		}
		return func(p float64) float64 { return math.Max(0, p*(1+v/100)) }, nil
	}
	return func(p float64) float64 { return math.Max(0, p+v) }, nil
}

// checkRequirement checks a requirement's values against its operator.
func checkRequirement(r karpv1alpha1.NodeSelectorRequirement) error {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return fmt.Errorf("key %s with operator %s must have a value", r.Key, r.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			return fmt.Errorf("key %s with operator %s must have no values", r.Key, r.Operator)
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(r.Values) != 1 {
			return fmt.Errorf("key %s with operator %s must have a single integer value", r.Key, r.Operator)
		}
		if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			return fmt.Errorf("key %s with operator %s: %q is not an integer", r.Key, r.Operator, r.Values[0])
		}
	default:
		return fmt.Errorf("key %s: unknown operator %q", r.Key, r.Operator)
	}
	if r.Key == "" {
		return errors.New("key must not be empty")
	}
	return nil
}

// Resolve orders the overlays as upstream does (the highest weight first; among equal
// weights, the name that sorts last first) and keeps those that apply: an invalid overlay is
// left out (RuntimeValidation), and so is one that would set an offering's price, or a
// resource of an instance type, that an overlay of the same weight applied before it already
// sets, in any of the pools (Conflict: it is left out whole, in every pool).
func Resolve(objs []*karpv1alpha1.NodeOverlay, pools []Pool) *Set {
	s := &Set{Problems: map[string]Problem{}}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *karpv1alpha1.NodeOverlay) int {
		wa, wb := weightOf(a), weightOf(b)
		if wa != wb {
			return int(wb) - int(wa)
		}
		return strings.Compare(b.Name, a.Name)
	})
	// setBy records, per pool, instance type and offering (or resource), the weight of the
	// overlay that set it: weights only fall in this order, so an equal one is a conflict.
	priceSetBy, capacitySetBy := map[offeringRef]int32{}, map[resourceRef]int32{}
	for _, o := range ordered {
		c, errs := compile(o)
		if len(errs) > 0 {
			s.Problems[o.Name] = Problem{Reason: ReasonRuntimeValidation, Message: errs.ToAggregate().Error()}
			continue
		}
		var priced []offeringRef
		var sized []resourceRef
		conflict := ""
		for p, pool := range pools {
			for _, it := range pool.InstanceTypes {
				if !c.matchesType(pool.NodePool, it) {
					continue
				}
				matched := false
				for i := range it.Offerings {
					if !c.matchesOffering(&it.Offerings[i]) {
						continue
					}
					matched = true
					if c.price == nil {
						continue
					}
					ref := offeringRef{pool: p, it: it, offering: i}
					if w, ok := priceSetBy[ref]; ok && w == c.weight && conflict == "" {
						conflict = fmt.Sprintf("sets the price of %s %s in NodePool %s, as another overlay of weight %d does", it.Name, offeringKey(it.Offerings[i]), pool.NodePool.Name, w)
					}
					priced = append(priced, ref)
				}
				if !matched {
					continue
				}
				for name := range c.capacity {
					ref := resourceRef{pool: p, it: it, name: name}
					if w, ok := capacitySetBy[ref]; ok && w == c.weight && conflict == "" {
						conflict = fmt.Sprintf("sets %s of %s in NodePool %s, as another overlay of weight %d does", name, it.Name, pool.NodePool.Name, w)
					}
					sized = append(sized, ref)
				}
			}
		}
		if conflict != "" {
			s.Problems[o.Name] = Problem{Reason: ReasonConflict, Message: "conflict with another overlay: " + conflict}
			continue
		}
		for _, ref := range priced {
			priceSetBy[ref] = c.weight
		}
		for _, ref := range sized {
			capacitySetBy[ref] = c.weight
		}
		s.overlays = append(s.overlays, c)
	}
	return s
}

// offeringRef and resourceRef name an offering, and an extended resource, of an instance type
// in the pool of that index.
type offeringRef struct {
	pool     int
	it       *cloudprovider.InstanceType
	offering int
}

type resourceRef struct {
	pool int
	it   *cloudprovider.InstanceType
	name corev1.ResourceName
}

func weightOf(o *karpv1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

func offeringKey(o cloudprovider.Offering) string {
	k := o.Zone + "/" + o.CapacityType
	if o.ReservationID != "" {
		k += "/" + o.ReservationID
	}
	return k
}

// matchesType reports whether the requirements on the instance type's and the NodePool's
// labels hold; matchesOffering whether those on the offering's hold. Together: whether the
// overlay selects the offering of the instance type in the pool. A requirement on a label the
// node would not carry holds only for NotIn and DoesNotExist.
func (c *overlay) matchesType(np *karpv1.NodePool, it *cloudprovider.InstanceType) bool {
	for _, r := range c.typeReqs {
		v, ok := labelOf(r.Key, np, it, nil)
		if ok && !r.Has(v) || !ok && !r.AllowsAbsent() {
			return false
		}
	}
	return true
}

func (c *overlay) matchesOffering(of *cloudprovider.Offering) bool {
	for _, r := range c.offerReqs {
		v, ok := labelOf(r.Key, nil, nil, of)
		if ok && !r.Has(v) || !ok && !r.AllowsAbsent() {
			return false
		}
	}
	return true
}

// labelOf is the value of a label a node of the offering in the pool would carry: an
// offering's key is read from of, any other from it and np.
func labelOf(key string, np *karpv1.NodePool, it *cloudprovider.InstanceType, of *cloudprovider.Offering) (string, bool) {
	switch key {
	case karpv1.LabelInstanceType:
		return it.Name, true
	case karpv1.LabelTopologyZone:
		return of.Zone, true
	case karpv1.CapacityTypeLabelKey:
		return of.CapacityType, true
	case karpv1.LabelCapacityReservationID:
		return of.ReservationID, of.ReservationID != ""
	case karpv1.NodePoolLabelKey:
		return np.Name, true
	}
	if v, ok := it.Labels[key]; ok {
		return v, true
	}
	v, ok := np.Spec.Template.Labels[key]
	return v, ok
}

// Apply returns the pool's instance types with the set's overlays applied: each offering takes
// the price of the first overlay (in the set's order) that selects it and sets a price, and
// each extended resource the quantity of the first that selects any of the type's offerings
// and names it. Types no overlay changes are returned as they are; the others are copies,
// marked PriceOverlaid or CapacityOverlaid.
func (s *Set) Apply(np *karpv1.NodePool, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if s.Empty() {
		return its
	}
	out, copied := its, false
	for i, it := range its {
		if changed := s.applyType(np, it); changed != nil {
			if !copied {
				out, copied = slices.Clone(its), true
			}
			out[i] = changed
		}
	}
	return out
}

// applyType is the instance type with the overlays applied, or nil when none changes it.
func (s *Set) applyType(np *karpv1.NodePool, it *cloudprovider.InstanceType) *cloudprovider.InstanceType {
	var offerings cloudprovider.Offerings
	var priced []bool
	var capacity corev1.ResourceList
	for _, c := range s.overlays {
		if !c.matchesType(np, it) {
			continue
		}
		matched := false
		for i := range it.Offerings {
			if !c.matchesOffering(&it.Offerings[i]) {
				continue
			}
			matched = true
			if c.price == nil {
				continue
			}
			if offerings == nil {
				offerings, priced = slices.Clone(it.Offerings), make([]bool, len(it.Offerings))
			}
			if !priced[i] {
				offerings[i].Price, priced[i] = c.price(it.Offerings[i].Price), true
			}
		}
		if !matched {
			continue
		}
		for name, q := range c.capacity {
			if capacity == nil {
				capacity = corev1.ResourceList{}
			}
			if _, set := capacity[name]; !set {
				capacity[name] = q.DeepCopy()
			}
		}
	}
	if offerings == nil && capacity == nil {
		return nil
	}
	cp := *it
	if offerings != nil {
		cp.Offerings, cp.PriceOverlaid = offerings, true
	}
	if capacity != nil {
		cp.Capacity = it.Capacity.DeepCopy()
		maps.Copy(cp.Capacity, capacity)
		cp.CapacityOverlaid = true
	}
	return &cp
}

// Memo remembers the latest resolutions and applications of overlays, keyed by the overlays'
// and the NodePools' UIDs and generations (their specs, not their status writes) and the
// identity of each pool's instance-type list
// (providers memoize those per generation), so that snapshots taken every few seconds reuse
// them. It holds a few keys (the whole cluster's snapshot and the one-NodePool usage of the
// NodePool status alternate) and forgets them all when full. It is safe for concurrent use.
type Memo struct {
	mu      sync.Mutex
	entries map[string]memoEntry
}

type memoEntry struct {
	set     *Set
	applied map[string][]*cloudprovider.InstanceType
}

// memoSize bounds the keys a Memo holds.
const memoSize = 16

// Apply resolves the overlays over the pools and applies them to each, by NodePool name.
func (m *Memo) Apply(objs []*karpv1alpha1.NodeOverlay, pools []Pool) (*Set, map[string][]*cloudprovider.InstanceType) {
	if m == nil {
		return apply(objs, pools)
	}
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "%s/%s/%d|", o.Name, o.UID, o.Generation)
	}
	for _, p := range pools {
		fmt.Fprintf(&b, "%s/%s/%d/%d/", p.NodePool.Name, p.NodePool.UID, p.NodePool.Generation, len(p.InstanceTypes))
		if len(p.InstanceTypes) > 0 {
			fmt.Fprintf(&b, "%p", &p.InstanceTypes[0])
		}
		b.WriteByte('|')
	}
	key := b.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		return e.set, e.applied
	}
	set, applied := apply(objs, pools)
	if m.entries == nil || len(m.entries) >= memoSize {
		m.entries = map[string]memoEntry{}
	}
	m.entries[key] = memoEntry{set: set, applied: applied}
	return set, applied
}

func apply(objs []*karpv1alpha1.NodeOverlay, pools []Pool) (*Set, map[string][]*cloudprovider.InstanceType) {
	set := Resolve(objs, pools)
	out := make(map[string][]*cloudprovider.InstanceType, len(pools))
	for _, p := range pools {
		out[p.NodePool.Name] = set.Apply(p.NodePool, p.InstanceTypes)
	}
	return set, out
}

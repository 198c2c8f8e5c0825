package solver

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// NodeClaim is a new node to launch.
type NodeClaim struct {
	NodePool string
	// Requirements are the NodePool's, narrowed by the pods.
	Requirements scheduling.Requirements
	// InstanceTypes the cloud provider may launch, cheapest first, at most MaxInstanceTypes.
	InstanceTypes []*cloudprovider.InstanceType
	// InstanceType and Offering are the cheapest choice.
	InstanceType *cloudprovider.InstanceType
	Offering     cloudprovider.Offering
	Pods         []*corev1.Pod
	// Requests are the pods' and the DaemonSets' requests.
	Requests corev1.ResourceList
	// Hostname stands for the node's hostname in topology until it exists.
	Hostname string
	// MinValuesRelaxed: a minValues of its requirements was lowered (Input.MinValuesBestEffort).
	MinValuesRelaxed bool

	pool    *pool
	types   []*instanceType
	filters []*offerFilter
	// typeFilters are the policies' type filters; the remaining types already pass them.
	typeFilters []func(*cloudprovider.InstanceType) bool
	// applied are the policy constraints whose filters are in filters.
	applied  []*Constraints
	ports    map[string]bool
	reserved corev1.ResourceList
	req      res
	// price is the cheapest offering among the remaining types; cheapest is that type.
	price    float64
	cheapest *instanceType
	// frozen: growing into a costlier type was refused once; the NodeClaim now only takes
	// pods that fit its cheapest type.
	frozen bool
	// seedPrice is what the seed NodeClaim it was rebuilt from cost (Input.Seed): it may grow
	// up to that price freely. 0 for a NodeClaim not rebuilt from a seed.
	seedPrice float64
	// memoAt is the stamp at which the NodeClaim last stored a refusal (refusal memo).
	memoAt int
	// maxAlloc is the largest allocatable cpu and memory among the remaining types, to turn
	// pods away without looking at every type.
	maxAlloc res
	// zoneMask and ctMask are the zones and capacity types the remaining types offer, as
	// bits of the solver's interner.
	zoneMask, ctMask uint64
	// ownTypes: types is the NodeClaim's own slice (at first it is the NodePool's).
	ownTypes bool
	// hostCounts count its pods by the hostname topology groups they match.
	hostCounts map[*group]int
}

// setTypes narrows the NodeClaim's remaining instance types.
func (c *NodeClaim) setTypes(types []*instanceType) {
	c.types, c.zoneMask, c.ctMask = types, 0, 0
	for _, t := range types {
		c.zoneMask, c.ctMask = c.zoneMask|t.zoneMask, c.ctMask|t.ctMask
	}
}

// notEnoughErrors are the errors of notEnough, made once per resource: a full NodeClaim turns
// away every pod tried on it, which made formatting them a large share of a solve.
var notEnoughErrors sync.Map

func notEnough(r corev1.ResourceName) error {
	if e, ok := notEnoughErrors.Load(r); ok {
		return e.(error)
	}
	e, _ := notEnoughErrors.LoadOrStore(r, fmt.Errorf("not enough %s", r))
	return e.(error)
}

func (s *solver) newClaim(pl *pool, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) (*NodeClaim, error) {
	if pl.excluded != "" {
		return nil, fmt.Errorf("%s", pl.excluded)
	}
	if pl.remaining != nil {
		if n, ok := pl.remaining[corev1.ResourceName("nodes")]; ok && n.Value() < 1 {
			limit := pl.np.Spec.Limits[corev1.ResourceName("nodes")]
			return nil, fmt.Errorf("limit nodes reached (%s)", limit.String())
		}
	}
	c := &NodeClaim{NodePool: pl.name, pool: pl, Requirements: pl.reqs.Copy(),
		Requests: pl.overhead.DeepCopy(), Hostname: s.hostname(pl), ports: map[string]bool{}, hostCounts: map[*group]int{},
		req: toRes(pl.overhead), maxAlloc: res{cpu: 1 << 62, mem: 1 << 62, pods: 1 << 62}}
	c.setTypes(pl.types)
	if c.Requests == nil {
		c.Requests = corev1.ResourceList{}
	}
	if err := s.tryClaim(c, p, requests, reqs, strict); err != nil {
		return nil, err
	}
	if pl.remaining != nil {
		if n, ok := pl.remaining[corev1.ResourceName("nodes")]; ok {
			n.Sub(resource.MustParse("1"))
			pl.remaining[corev1.ResourceName("nodes")] = n
		}
	}
	return c, nil
}

// commit applies a plan.
func (s *solver) commit(pl *claimPlan) {
	c, p, merged, kept, filters := pl.c, pl.p, pl.merged, pl.kept, pl.filters
	scheduling.AddResources(c.Requests, pl.requests)
	c.Requirements, c.filters, c.typeFilters, c.applied = merged, filters, pl.typeFilters, pl.applied
	// The plan's kept types are in the solver's buffer; they are a subset of the NodeClaim's.
	if c.ownTypes {
		c.setTypes(c.types[:copy(c.types, kept)])
	} else {
		c.setTypes(slices.Clone(kept))
		c.ownTypes = true
	}
	c.req, c.maxAlloc, c.price, c.cheapest = pl.total, pl.maxAlloc, pl.price, pl.cheapest
	c.MinValuesRelaxed = c.MinValuesRelaxed || pl.relaxed
	for _, hp := range pl.ports {
		c.ports[hp] = true
	}
	c.Pods = append(c.Pods, p)
	if c.pool.remaining != nil {
		// Reserve, against the NodePool's limits, the capacity of the type it would launch.
		reserve := corev1.ResourceList{}
		for k, q := range cheapestType(kept, merged, filters).it.Capacity {
			if _, limited := c.pool.remaining[k]; limited && k != "nodes" {
				reserve[k] = q
			}
		}
		if c.reserved != nil {
			scheduling.AddResources(c.pool.remaining, c.reserved)
		}
		c.pool.remaining = scheduling.Subtract(c.pool.remaining, reserve)
		c.reserved = reserve
	}
	s.topo.count(p, func(key string) (string, bool) {
		if key == corev1.LabelHostname {
			return c.Hostname, true
		}
		if r, ok := c.Requirements[key]; ok {
			if v, single := r.Single(); single {
				return v, true
			}
		}
		return "", false
	}, c.hostCounts)
}

// withinLimits checks capacity against the resources a NodePool limits.
func withinLimits(capacity, limit corev1.ResourceList) (bool, corev1.ResourceName) {
	for k, l := range limit {
		if k == "nodes" {
			continue
		}
		if c, ok := capacity[k]; ok && c.Cmp(l) > 0 {
			return false, k
		}
	}
	return true, ""
}

// priced is a type with its cheapest offering, in finalize: only the price is kept per type
// when typePrices knows it, and the offering is looked up again for the one chosen.
type priced struct {
	t *instanceType
	o cloudprovider.Offering
}

// finalize orders a NodeClaim's instance types cheapest first and picks the cheapest; a
// reserved offering it picks takes one of its reservation's room, so that once the room is
// gone the NodeClaims finalized after it take the next cheapest offering.
func (s *solver) finalize(c *NodeClaim) {
	// Types have distinct names, so the one price rule orders them by price and name; the
	// offering's zone and capacity type break no tie, and a kept price (typePrices) will do.
	prices := s.typePrices(c.pool, c.Requirements, c.filters)
	// The scratch slice is the solver's: finalize runs once per NodeClaim, one at a time, and
	// at 20 000 pods on the EC2 catalog a fresh one each time was a third of a solve's bytes.
	ps := s.finalScratch[:0]
	defer func() { clear(ps); s.finalScratch = ps[:0] }()
	for _, t := range c.types {
		if prices != nil {
			if p := prices[t.idx]; p >= 0 {
				ps = append(ps, priced{t, cloudprovider.Offering{Price: p}})
			}
		} else if o, ok := t.cheapestOffering(c.Requirements, c.filters); ok {
			ps = append(ps, priced{t, o})
		}
	}
	byPrice := func(a, b priced) int { return cloudprovider.CompareOfferings(a.t.it.Name, a.o, b.t.it.Name, b.o) }
	if len(ps) > MaxInstanceTypes {
		// Only the cheapest MaxInstanceTypes are kept: select them (the rule is a total
		// order, so which they are does not depend on how), then sort those.
		selectFirst(ps, MaxInstanceTypes, byPrice)
		ps = ps[:MaxInstanceTypes]
	}
	slices.SortFunc(ps, byPrice)
	c.InstanceTypes = make([]*cloudprovider.InstanceType, 0, len(ps))
	for _, p := range ps {
		c.InstanceTypes = append(c.InstanceTypes, p.t.it)
	}
	if len(ps) > 0 {
		// The offering launched is scheduling's one answer for the cheapest type, under the
		// solve's own restrictions (available, reservation room, policy filters); the inner
		// loops above ask the interned copy of the same rule for speed.
		l, ok := scheduling.CheapestOffering([]*cloudprovider.InstanceType{ps[0].t.it}, c.Requirements, nil, ps[0].t.allows(c.filters))
		if !ok {
			// Cannot happen while both spell the same rule (TestOneCheapestOffering).
			l.Offering, _ = ps[0].t.cheapestOffering(c.Requirements, c.filters)
		}
		c.InstanceType, c.Offering = ps[0].t.it, l.Offering
		if c.Offering.ReservationID != "" {
			s.reserved[c.Offering.ReservationID]--
		}
	}
}

// hostname names the next NodeClaim of the pool for topology: "<pool>-nodeclaim-<n>", with a
// suffix when a node of the input already has that name (a simulation that applies one
// solve's NodeClaims as nodes and solves again, methods.Cluster.Apply).
func (s *solver) hostname(pl *pool) string {
	name := fmt.Sprintf("%s-nodeclaim-%d", pl.name, len(s.claims))
	for k := 1; s.nodeNames[name]; k++ {
		name = fmt.Sprintf("%s-nodeclaim-%d-%d", pl.name, len(s.claims), k)
	}
	return name
}

func reqString(rs scheduling.Requirements, key string) string {
	if r, ok := rs[key]; ok {
		return r.String()
	}
	return key + " (any)"
}

func resourcesString(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// domains are the values key can still take on the NodeClaim: those its requirements and
// remaining instance types allow.
func (c *NodeClaim) domains(in *interner, key string, reqs scheduling.Requirements) []string {
	r, constrained := reqs[key]
	if in.exact() && (key == karpv1.LabelTopologyZone || key == karpv1.CapacityTypeLabelKey) {
		names, mask := in.zones, c.zoneMask
		if key == karpv1.CapacityTypeLabelKey {
			names, mask = in.cts, c.ctMask
		}
		var out []string
		for name, b := range names {
			if mask&b != 0 && (!constrained || r.Has(name)) {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	out := sets.New[string]()
	if c.pool.typeKeys.Has(key) {
		for _, t := range c.types {
			var values sets.Set[string]
			switch key {
			case karpv1.LabelTopologyZone:
				values = t.zones
			case karpv1.CapacityTypeLabelKey:
				values = t.capacityTypes
			default:
				if v, ok := t.it.Labels[key]; ok && (!constrained || r.Has(v)) {
					out.Insert(v)
				}
				continue
			}
			for v := range values {
				if !out.Has(v) && (!constrained || r.Has(v)) {
					out.Insert(v)
				}
			}
		}
		return sets.List(out)
	}
	if constrained && !r.Complement() {
		return r.Values()
	}
	return nil
}

// selectFirst moves the k smallest elements of s by cmp (a total order) to s[:k], in no
// particular order: quickselect, linear on average where sorting is n log n.
func selectFirst[T any](s []T, k int, cmp func(a, b T) int) {
	lo, hi := 0, len(s)-1
	for lo < hi {
		// The median of three as the pivot, moved to hi.
		mid := lo + (hi-lo)/2
		if cmp(s[mid], s[lo]) < 0 {
			s[mid], s[lo] = s[lo], s[mid]
		}
		if cmp(s[hi], s[lo]) < 0 {
			s[hi], s[lo] = s[lo], s[hi]
		}
		if cmp(s[mid], s[hi]) < 0 {
			s[mid], s[hi] = s[hi], s[mid]
		}
		pivot, store := s[hi], lo
		for i := lo; i < hi; i++ {
			if cmp(s[i], pivot) < 0 {
				s[i], s[store] = s[store], s[i]
				store++
			}
		}
		s[store], s[hi] = s[hi], s[store]
		switch {
		case store == k-1 || store == k:
			return
		case store < k:
			lo = store + 1
		default:
			hi = store - 1
		}
	}
}
